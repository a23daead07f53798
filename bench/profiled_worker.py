"""`lonca daemon` measured over a bench's measured phase only: SIGUSR1 starts, SIGUSR2 stops
and writes to $LONCA_BENCH_PROFILE_OUT a JSON summary (the CPU seconds of the process and of its
event loop's thread, the collector's pauses by generation, the log's commits and entries, the
tree maps made on the loop by TreeMaps.near) and, with LONCA_BENCH_CPROFILE=1,
cProfile's stats of the loop's thread beside it (`.prof`, read with `python -m pstats`), timed
in that thread's CPU seconds: in wall time a wait for a core or for the GIL counted against
whatever function was running, epoll's poll above all.
CPU seconds are what a request costs whatever else runs on a shared machine; setup (imports,
sessions, unrelated leases) stays out. py-spy could not attach on the shared machines.
The summary also holds the event loop's lag: a thread asks the loop to run a callback every
LAG_TICK_S and notes how late it ran, which is what any request arriving then waited before the
loop could read it (its own work aside)."""
import asyncio
import cProfile
import gc
import json
import os
import signal
import sys
import threading
import time

from lonca.admin_commands import cmd_daemon
from lonca.cli import build_parser
from lonca.service.change_build import TreeMaps
from lonca.service.log import LogWriter

_profile = cProfile.Profile(time.thread_time) if os.environ.get("LONCA_BENCH_CPROFILE") == "1" else None
_pauses: list[tuple[int, float]] = []   # (generation, ms) of each collection while measuring
_collect_started: list[float] = []
_cpu_at_start: list[float] = []
_commits = [0, 0]   # (commits, entries) while measuring: a request's CPU falls as batches grow
LAG_TICK_S = 0.002


class _LoopLag:
    """How late the loop runs a callback asked of it every LAG_TICK_S (one at a time), in ms."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.lags = loop, []
        self._stop = threading.Event()
        self._ran = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-loop-lag", daemon=True)
        self._thread.start()

    def _ran_at(self, asked: float) -> None:
        self.lags.append((time.perf_counter() - asked) * 1000)
        self._ran.set()

    def _run(self) -> None:
        while not self._stop.wait(LAG_TICK_S):
            self._ran.clear()
            self.loop.call_soon_threadsafe(self._ran_at, time.perf_counter())
            while not self._ran.wait(0.5) and not self._stop.is_set():
                pass

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        lags = sorted(self.lags)
        if not lags:
            return {}

        def at(p: float) -> float:
            return round(lags[min(len(lags) - 1, int(p / 100 * (len(lags) - 1)))], 1)
        return {"ticks": len(lags), "p50": at(50), "p99": at(99), "max": round(lags[-1], 1),
                "over_20ms": sum(x > 20 for x in lags)}


_lag: list[_LoopLag] = []


def _counting(commit):
    def counted(self, entries, *rest):
        commit(self, entries, *rest)
        if _cpu_at_start:
            _commits[0] += 1
            _commits[1] += len(entries)
    return counted


LogWriter._commit = _counting(LogWriter._commit)  # type: ignore[method-assign]
_made_near = [0]    # tree maps made on the event loop (TreeMaps.near) while measuring


def _counting_near(near):
    def counted(self, repo, commit_id):
        held = self.held(commit_id, wait=False)
        m = near(self, repo, commit_id)
        if _cpu_at_start and held is None and m is not None:
            _made_near[0] += 1
        return m
    return counted


TreeMaps.near = _counting_near(TreeMaps.near)  # type: ignore[method-assign]


def _collecting(phase: str, info: dict) -> None:
    if phase == "start":
        _collect_started[:] = [time.perf_counter()]
    elif _collect_started:
        _pauses.append((info["generation"], (time.perf_counter() - _collect_started[0]) * 1000))


def _start(*_) -> None:
    _pauses.clear()
    _commits[:] = [0, 0]
    _made_near[0] = 0
    gc.callbacks.append(_collecting)
    _cpu_at_start[:] = [time.process_time(), time.thread_time()]    # signals run on the loop's thread
    _lag[:] = [_LoopLag(asyncio.get_running_loop())]
    if _profile:
        _profile.enable()


def _stop(*_) -> None:
    if _profile:
        _profile.disable()
    process_s, loop_s = time.process_time() - _cpu_at_start[0], time.thread_time() - _cpu_at_start[1]
    _cpu_at_start.clear()
    gc.callbacks.remove(_collecting)
    out = os.environ["LONCA_BENCH_PROFILE_OUT"]
    if _profile:
        _profile.dump_stats(out + ".prof")
    pauses = {str(g): {"count": len(ms), "total_ms": round(sum(ms), 1), "longest_ms": round(max(ms), 1)}
              for g in (0, 1, 2) if (ms := [p for gen, p in _pauses if gen == g])}
    with open(out + ".tmp", "w") as f:
        json.dump({"process_cpu_s": process_s, "loop_cpu_s": loop_s, "gc": pauses,
                   "commits": _commits[0], "entries": _commits[1], "maps_made_near": _made_near[0], "loop_lag_ms": _lag.pop().stop()}, f)
    os.replace(out + ".tmp", out)   # whole when the bench sees it


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    # the stop runs as a callback of the loop, not wherever the signal lands: landing inside the
    # lag probe's Event.set (its lock held), it joined the probe's thread, which waits for that
    # lock, and hung the worker's stop (2 bench runs in 65)
    signal.signal(signal.SIGUSR2, lambda *_: asyncio.get_running_loop().call_soon_threadsafe(_stop))
    sys.exit(cmd_daemon(build_parser().parse_args(["daemon"])))   # as `lonca daemon` with no options
