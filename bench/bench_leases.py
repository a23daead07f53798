"""Lease figures: 64 agents acquiring, renewing and releasing leases on distinct symbols of a
2 000-file repository, beside the same run's single-row durable SQLite commit rate; and the same
load with 100 000 unrelated items held against 1 000 held (the conflict check is indexed by path)."""
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.worker import BenchWorker, drive, pct, sqlite_commit_rate, table

AGENTS = 64
FILES = 2000
DURATION = 4.0


def make_repo() -> Path:
    src = Path(tempfile.mkdtemp(prefix="lonca-bench-src-"))
    for i in range(FILES):
        d = src / f"pkg{i // 100}"
        d.mkdir(exist_ok=True)
        (d / f"m{i}.py").write_text(f"def fn{i}(x):\n    return x + {i}\n\n\nclass K{i}:\n    def m(self):\n        return {i}\n")
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x.invalid", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "bench"]):
        subprocess.run(["git", *args], cwd=src, env=env, check=True)
    return src


def hold_unrelated(w: BenchWorker, count: int) -> None:
    """Sessions holding `count` items in all on files the agents never touch (50 sets of 1 000
    items each at most, under the policy's sets per session)."""
    per = 1000
    tokens = w.start_sessions(max(1, count // (50 * per) + 1))
    with w.client() as c:
        for start in range(0, count, per):
            token = tokens[start // (50 * per)]
            items = [{"symbol": f"pkg{10 + (k % 1000) // 100}/m{1000 + k % 1000}.py#h{k}", "kind": "edit"}
                     for k in range(start, min(count, start + per))]
            res = c.call("lease.acquire", {"set": f"held-{start}", "items": items, "intent": "unrelated work",
                                           "ttl_ms": 3_600_000}, token=token)
            assert res["decision"]["outcome"] == "allow", res["decision"]


def run_load(held: int, src: Path) -> tuple[float, list[float]]:
    """`LONCA_BENCH_PROFILE=<folder>`: the worker is measured while the load runs, into
    <folder>/leases-<held>.json (bench/profiled_worker.py), and its CPU per request printed."""
    folder = os.environ.get("LONCA_BENCH_PROFILE")
    out = Path(folder) / f"leases-{held}.json" if folder else None
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)  # the worker writes there, and can not say it failed
    w = BenchWorker(profile=out)
    try:
        w.init_repo("bench", import_from=str(src))
        w.policy("[sessions]\nops_per_minute = 10000000\n")  # a benchmark, not an agent: no rate limit
        hold_unrelated(w, held)
        tokens = w.start_sessions(AGENTS)
        reqs = []
        for i, t in enumerate(tokens):
            sym = {"symbol": f"pkg{i // 100}/m{i}.py#fn{i}", "kind": "edit"}
            s = f"bench-{i}"
            reqs.append([
                {"id": 1, "method": "lease.acquire", "token": t, "params": {"set": s, "items": [sym], "intent": "bench", "ttl_ms": 600_000}},
                {"id": 2, "method": "lease.renew", "token": t, "params": {"set": s, "ttl_ms": 600_000}},
                {"id": 3, "method": "lease.release", "token": t, "params": {"set": s}},
            ])
        with w.profiling():
            client_s = time.process_time()
            n, lat = drive(w.socket, reqs, DURATION)
            client_s = time.process_time() - client_s
        if out:
            cpu = json.loads(out.read_text())
            print(f"{held} held: {n} requests; worker CPU {cpu['process_cpu_s'] / n * 1e6:.0f} us a request, "
                  f"its event loop {cpu['loop_cpu_s'] / n * 1e6:.0f} us, the bench's client {client_s / n * 1e6:.0f} us; "
                  f"{cpu['entries'] / max(1, cpu['commits']):.1f} entries a commit; collections {cpu['gc']}", flush=True)
        return n / DURATION, lat
    finally:
        w.stop()


def main() -> None:
    src = make_repo()
    load_before = os.getloadavg()[0]
    base = sqlite_commit_rate()
    rate_1k, lat_1k = run_load(1_000, src)
    rate_100k, lat_100k = run_load(100_000, src)
    base = (base + sqlite_commit_rate()) / 2
    # the figures are wall-clock: on a shared machine they mean little without the load beside them
    print(f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores")
    table([
        ("lease ops/s (64 agents, 1k held) vs SQLite commits/s", rate_1k, base, ">= 1.0x"),
        ("lease ops p99 ms (1k held)", pct(lat_1k, 99), None, "< 25"),
        ("lease ops/s with 100k held vs with 1k held", rate_100k, rate_1k, ">= 0.8x"),
        ("lease ops p99 ms (100k held)", pct(lat_100k, 99), None, "< 25"),
    ])


if __name__ == "__main__":
    main()
