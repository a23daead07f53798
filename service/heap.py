"""Keeping long-lived objects out of the collector's full passes.

A full collection walks every object tracked since the last freeze, holding the GIL: over the
modules and a replayed state alone it took 40–170 ms on a loaded machine, and every request
waited (bench leases). Objects made to last (the start's, a warm's tables) are frozen once made:
young generations collected (cheap: only what is new), then `gc.freeze()`, which moves lists and
walks nothing. A frozen object that holds no cycle is still freed by its reference count."""
import gc


def freeze() -> None:
    gc.collect(1)
    gc.freeze()
