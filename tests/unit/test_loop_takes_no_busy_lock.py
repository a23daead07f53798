"""What the event loop reads from the caches it shares with the worker's threads (trunk_tables:
tables held for lease.acquire; a hook step's base map) never waits for a lock a thread holds:
`wait=False` answers None at once, and the caller takes the thread's path. Waiting, the loop
waited for that thread to get the GIL back and finish (docs/decisions.md, "Nothing holds the
GIL for long at 100 000 files")."""
import threading
import time

from lonca.service.change_build import TreeMaps
from lonca.service.trunk_tables import _held
from lonca.symbols import SymbolCache, TreeEntry


def hold(lock: threading.Lock, seconds: float) -> threading.Thread:
    taken = threading.Event()

    def run() -> None:
        with lock:
            taken.set()
            time.sleep(seconds)
    t = threading.Thread(target=run)
    t.start()
    taken.wait()
    return t


def test_the_loop_does_not_wait_for_a_lock_a_thread_holds() -> None:
    maps, cache = TreeMaps(), SymbolCache()
    oid = "1" * 40
    maps.put("c1", {"a.py": TreeEntry(oid, "100644")})
    cache.table("a.py", oid, lambda: b"def f():\n    return 1\n")
    assert set(_held(maps, cache, "c1", ["a.py"], frozenset())) == {"a.py"}     # all held: from memory
    for lock in (maps._lock, cache._lock):
        t = hold(lock, 2.0)
        started = time.perf_counter()
        assert _held(maps, cache, "c1", ["a.py"], frozenset()) is None
        assert time.perf_counter() - started < 0.5
        t.join()
    started = time.perf_counter()
    t = hold(cache._lock, 0.3)
    assert cache.held([("a.py", oid)]) != [None]        # a thread waits for it, as before
    assert time.perf_counter() - started >= 0.25
    t.join()
