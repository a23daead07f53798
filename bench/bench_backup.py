"""Backup and restore figures (issue 14): seconds for `repo.backup` (a bundle of every ref, the log
included) and for `repo.restore` of that bundle on a fresh worker with another home (the log
verified whole, replayed and written), with 100,000 log entries, beside the same repository at
1,000 entries measured in the same run.

The entries are a session's heartbeats, written in this process through the worker's own
LogWriter while the worker is stopped (bench_history.append_in_process): driving 100,000 through
the socket would take minutes."""
import shutil
import time

from bench.bench_history import append_in_process
from bench.worker import BenchWorker, table

SMALL, LARGE = 1_000, 100_000


def steps_to(have: int, entries: int, now: int) -> list[tuple[dict, dict]]:
    """From `have` entries to `entries`: a session's start (when only repo.init is there), then
    its heartbeats."""
    start = ({"kind": "human", "name": "bench"},
             {"op": "session.start", "session": "live", "agent": "agent0", "model": None, "task": "bench",
              "expires_ms": now + 86_400_000, "scope": {"paths": ["**"]}})
    beat = ({"kind": "agent", "session": "live", "agent": "agent0"},
            {"op": "observe", "session": "live", "events": [{"kind": "heartbeat"}]})
    return ([start] if have == 1 else []) + [beat] * (entries - have - (1 if have == 1 else 0))


def fill_to(w: BenchWorker, entries: int) -> None:
    """Stop the worker, log heartbeats until the log holds `entries`, start it again."""
    with w.client() as c:
        have = c.call("status", repo="bench", token=w.htoken)["next_seq"] - 1
    w.stop()
    append_in_process(w, "bench", steps_to(have, entries, int(time.time() * 1000)))
    w.start(timeout_s=1800)


def round_trip(a: BenchWorker, entries: int) -> tuple[float, float]:
    """(backup s, restore s) of the repository of `a`, restored on a fresh worker on a's key."""
    from lonca.client import Client
    t = time.perf_counter()
    with Client(a.socket, timeout=1800) as c:
        out = c.call("repo.backup", {}, repo="bench", token=a.htoken)
    backup_s = time.perf_counter() - t
    assert out["seq"] == entries, out
    b = BenchWorker()
    try:
        b.stop()
        shutil.copy(a.tmp / "home" / "daemon.key", b.tmp / "home" / "daemon.key")
        b.start()
        carried = b.tmp / "carried.bundle"
        shutil.copy(out["path"], carried)
        t = time.perf_counter()
        with Client(b.socket, timeout=1800) as c:
            got = c.call("repo.restore", {"repo": "bench", "from": str(carried)})
        restore_s = time.perf_counter() - t
        assert got["seq"] == entries and got["head_hash"] == out["head_hash"], got
        print(f"  {entries} entries: backup {backup_s:.2f} s ({carried.stat().st_size / 1e6:.1f} MB), "
              f"restore {restore_s:.2f} s", flush=True)
    finally:
        b.stop()
        shutil.rmtree(b.tmp, ignore_errors=True)
    return backup_s, restore_s


def main() -> None:
    a = BenchWorker()
    try:
        a.init_repo("bench")
        fill_to(a, SMALL)
        small = round_trip(a, SMALL)
        fill_to(a, LARGE)
        large = round_trip(a, LARGE)
    finally:
        a.stop()
        shutil.rmtree(a.tmp, ignore_errors=True)
    table([(f"repo.backup, {LARGE:,} entries (s)", large[0], small[0], f"baseline: {SMALL:,} entries"),
           (f"repo.restore, {LARGE:,} entries (s)", large[1], small[1], f"baseline: {SMALL:,} entries")])
