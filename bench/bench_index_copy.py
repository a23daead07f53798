"""A base's name index made at a trunk move (`python -m bench index_copy`, issue 18).

The incremental warm copies the previous base's index (mentions.NameIndex: 100 000 files and
300 000 names at 100 000 files), changes a few entries, and later releases the oldest index.
Measured the way the worker did it before (two dicts: one call of C for each copy and each
release, holding the GIL) beside SharedMap (symbols/shared_map.py), alternating, in one process
with the worker's 1 ms switch interval: the copying thread's CPU, and the longest a second
thread (one that sleeps 0.5 ms and wakes, as the event loop does around each system call)
waited to run again, i.e. the longest the GIL was held in one piece.
BENCH_INDEX_FILES (100000), BENCH_INDEX_NAMES (300000), BENCH_INDEX_ROUNDS (10)."""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time

from lonca.symbols.shared_map import SharedMap

SWITCH_S = 0.001    # service.daemon.SWITCH_S (the bench imports nothing of the worker)


class Ticker:
    """A thread that sleeps 0.5 ms at a time and notes how late it woke (ms)."""

    def __init__(self) -> None:
        self.late: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(0.0005)
            self.late.append(max(0.0, (time.perf_counter() - t) * 1000 - 0.5))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    n_files, n_names = int(os.environ.get("BENCH_INDEX_FILES", "100000")), int(os.environ.get("BENCH_INDEX_NAMES", "300000"))
    rounds = int(os.environ.get("BENCH_INDEX_ROUNDS", "10"))
    files = {f"pkg{i % 500}/mod{i}.py": (f"{i:040x}", None) for i in range(n_files)}
    names = {f"name_{i}": (1, (f"pkg{i % 500}/mod{i % n_files}.py",)) for i in range(n_names)}
    shared_files, shared_names = SharedMap(files), SharedMap(names)
    edited = [f"name_{i}" for i in range(0, n_names, n_names // 5)]  # a one-function change's few names
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    ticker = Ticker()
    cpu: dict[str, list[float]] = {"dicts": [], "SharedMap": []}
    held: dict[str, list[float]] = {"dicts": [], "SharedMap": []}
    try:
        for _ in range(rounds):
            for how in ("dicts", "SharedMap"):
                time.sleep(0.05)
                ticker.late.clear()
                t = time.thread_time()
                if how == "dicts":
                    new_files, new_names = dict(files), dict(names)
                else:
                    new_files, new_names = shared_files.copy(), shared_names.copy()
                for name in edited:
                    new_names[name] = (2, ())
                del new_files, new_names    # the index a trunk move makes old, released
                cpu[how].append((time.thread_time() - t) * 1000)
                held[how].append(max(ticker.late, default=0.0))
    finally:
        ticker.stop()
        sys.setswitchinterval(previous)
    print(f"{n_files} files, {n_names} names; {rounds} rounds each, alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"{'figure':<52}{'dicts':>10}{'SharedMap':>12}")
    for label, values, pick in (("copy + release, thread CPU, median (ms)", cpu, statistics.median),
                                ("longest GIL hold seen by a ticker, median (ms)", held, statistics.median),
                                ("longest GIL hold seen by a ticker, max (ms)", held, max)):
        print(f"{label:<52}{pick(values['dicts']):10.2f}{pick(values['SharedMap']):12.2f}")


if __name__ == "__main__":
    main()
