"""Keeping long-lived objects out of the collector's full passes.

A full collection walks every object tracked since the last freeze, holding the GIL: over the
modules and a replayed state alone it took 40–170 ms on a loaded machine, and every request
waited (bench leases). Objects made to last (the start's, a warm's tables) are frozen once made:
young generations collected (cheap: only what is new), then `gc.freeze()`, which moves lists and
walks nothing. A frozen object that holds no cycle is still freed by its reference count.

And the worker's garbage is freed by reference counts: what a young collection finds is mostly
live request objects (a lease set lives for a few requests), which it moves up until a full
collection walks them all. Collecting the young every 10 000 new objects instead of 700 lets them
die first: over 20 s of the lease bench, 2 young collections and no full one, against 418 and 4
(0.35 s in all)."""
import gc

YOUNG = 10_000  # net new tracked objects between young collections (Python's default: 700)


def tune() -> None:
    """The collector's thresholds for the worker's process (at its start)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)


def freeze() -> None:
    gc.collect(1)
    gc.freeze()
