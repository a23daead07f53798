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
import ctypes
import gc

YOUNG = 10_000  # net new tracked objects between young collections (Python's default: 700)
RELEASE_EVERY_S = 30.0  # between two returns of the C heap's free pages (release)
M_ARENA_MAX = -8    # glibc's mallopt parameter (malloc.h)
ARENAS = 2          # malloc arenas for the worker's threads: the main one and one more


def tune() -> None:
    """The collector's thresholds and glibc's arena limit for the worker's process, at its start
    (before it starts a thread). glibc gives each new thread that allocates an arena of its own,
    up to 8 per core, and each arena keeps its own free pages: in the soak bench the threads'
    arenas grew about as much as Python's objects did. MALLOC_ARENA_MAX does the same but is read
    before the process starts (every service manager would have to set it); mallopt is that
    lever at run time (docs/decisions.md, "Settled changes in the database, two malloc arenas")."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
    if _MALLOPT is not None:
        _MALLOPT(M_ARENA_MAX, ARENAS)


def freeze() -> None:
    gc.collect(1)
    gc.freeze()


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim    # glibc's; other C libraries have none
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _malloc_trim()


def _mallopt():
    try:
        return ctypes.CDLL(None).mallopt    # glibc's (musl has one that ignores M_ARENA_MAX)
    except (OSError, AttributeError):
        return None


_MALLOPT = _mallopt()


def release() -> None:
    """Give the free pages of the C heap back to the system. Objects over 512 bytes (dicts of the
    state, encoded lines, blobs read) come from malloc, and a page freed amid pages in use stays in
    the process: in the soak bench (python -m bench soak) the main arena held 159 MB in use and
    317 MB in all after 9 minutes, which is what RSS kept climbing by. malloc_trim hands such pages
    back (madvise); it took 2 to 30 ms there, on a thread: the GIL is let go around a ctypes call."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
