"""`lonca daemon` measured over a bench's measured phase only: SIGUSR1 starts, SIGUSR2 stops
and writes to $LONCA_BENCH_PROFILE_OUT a JSON summary (the CPU seconds of the process and of its
event loop's thread, the collector's pauses by generation, the log's commits and entries) and, with LONCA_BENCH_CPROFILE=1,
cProfile's stats of the loop's thread beside it (`.prof`, read with `python -m pstats`), timed
in that thread's CPU seconds: in wall time a wait for a core or for the GIL counted against
whatever function was running, epoll's poll above all.
CPU seconds are what a request costs whatever else runs on a shared machine; setup (imports,
sessions, unrelated leases) stays out. py-spy could not attach on the shared machines."""
import cProfile
import gc
import json
import os
import signal
import sys
import time

from lonca.admin_commands import cmd_daemon
from lonca.cli import build_parser
from lonca.service.log import LogWriter

_profile = cProfile.Profile(time.thread_time) if os.environ.get("LONCA_BENCH_CPROFILE") == "1" else None
_pauses: list[tuple[int, float]] = []   # (generation, ms) of each collection while measuring
_collect_started: list[float] = []
_cpu_at_start: list[float] = []
_commits = [0, 0]   # (commits, entries) while measuring: a request's CPU falls as batches grow


def _counting(commit):
    def counted(self, entries, *rest):
        commit(self, entries, *rest)
        if _cpu_at_start:
            _commits[0] += 1
            _commits[1] += len(entries)
    return counted


LogWriter._commit = _counting(LogWriter._commit)  # type: ignore[method-assign]


def _collecting(phase: str, info: dict) -> None:
    if phase == "start":
        _collect_started[:] = [time.perf_counter()]
    elif _collect_started:
        _pauses.append((info["generation"], (time.perf_counter() - _collect_started[0]) * 1000))


def _start(*_) -> None:
    _pauses.clear()
    _commits[:] = [0, 0]
    gc.callbacks.append(_collecting)
    _cpu_at_start[:] = [time.process_time(), time.thread_time()]    # signals run on the loop's thread
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
                   "commits": _commits[0], "entries": _commits[1]}, f)
    os.replace(out + ".tmp", out)   # whole when the bench sees it


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(cmd_daemon(build_parser().parse_args(["daemon"])))   # as `lonca daemon` with no options
