"""A soak (`python -m bench soak`, issue 17): 32 agents for 10 minutes on a trunk growing to
10,000 files, and whether the worker's cost grows with what it has seen.

A real worker imports a generated repository (bench/scale_repo.py). Each agent loops
facts.preview -> lease.acquire (what the preview says is free) -> change.propose -> wait for the
integration (read from the log) -> lease.release; each change adds new files of the agent's own
until trunk holds the target, and edits one of them after that. Each agent also beats from a
connection of its own, every timeout_ms / 3 as lonca mcp does. No rate limit is lifted and no
policy set: agents as they run, and an agent past [sessions] ops_per_minute waits as long as the
refusal says and sends the request again, as the seed asks (counted as `throttled`).

Printed per minute: the requests answered and their p50 / p99 (every agent request, heartbeats
included), p99 of facts.preview and change.propose, integrations, trunk's files, log entries and
the worker's RSS; then the issue's figures: p99 in the last minute against the first (target
within 2x), RSS at the end against half-way (target: levels off, and < 300 MB) and the store's
loose objects (packed in the background).

Settings: BENCH_SOAK_SECONDS (default 600; 60-120 to iterate), BENCH_SOAK_AGENTS (32),
BENCH_SOAK_FILES (trunk's target, 10000), BENCH_SOAK_BASE_FILES (the imported repository, 1000),
BENCH_SOAK_FILES_PER_CHANGE (new files a change adds, 1).
"""
from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.bench_scale import Conn, Follower
from bench.procstat import rss_mb
from bench.scale_repo import build
from bench.worker import BenchWorker, pct
from lonca.protocol import LoncaError, claim_from_facts

TARGET_FILES_DEFAULT = 10_000
MINUTE_S = 60


@dataclass
class Soak:
    """What the run shares: the clock it started on, every answered request, trunk's files."""
    t0: float
    stop_at: float
    trunk_files: int
    target_files: int
    requests: list[tuple[float, str, float]] = field(default_factory=list)  # (seconds in, method, ms)
    integrated: list[float] = field(default_factory=list)  # seconds in, of each landed change
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds in, MB)
    entries: list[tuple[float, int]] = field(default_factory=list)  # (seconds in, next log seq)
    refused: dict[str, int] = field(default_factory=dict)  # outcome or reason -> count
    throttled: int = 0  # rate_limited answers waited out (a quiet machine runs agents faster than the limit)

    def running(self) -> bool:
        return time.perf_counter() < self.stop_at


class TimedConn(Conn):
    """A connection whose every answer's latency goes into the soak's record."""

    soak: Soak

    async def call(self, method: str, params: dict | None = None, token: str | None = None,
                   repo: str | None = "bench"):
        while True:
            t = time.perf_counter()
            try:
                out = await super().call(method, params, token, repo)
                break
            except LoncaError as e:
                if e.code != "rate_limited":
                    raise
                self.soak.throttled += 1
                wait = re.search(r"try again in (\d+) s", e.message)
                await asyncio.sleep(int(wait.group(1)) if wait else 1)
        now = time.perf_counter()
        self.soak.requests.append((now - self.soak.t0, method, (now - t) * 1000))
        return out


async def timed(socket: Path, soak: Soak) -> TimedConn:
    conn = await TimedConn.open(socket)
    conn.soak = soak
    return conn


def new_file(agent: int, k: int, version: int = 0) -> dict:
    """An agent's k-th file: a module of two functions, in folders of at most 100 files."""
    text = (f'"""Soak file {k} of agent {agent}."""\n\n\n'
            f"def a{agent}_f{k}(x):\n    return x + {k}\n\n\n"
            f"def a{agent}_g{k}(x, y):\n    return x * y + {version}\n")
    return {"path": f"soak/a{agent:02d}/g{k // 100:03d}/n{k}.py",
            "content_b64": base64.b64encode(text.encode()).decode(), "mode": None}


async def agent(socket: Path, soak: Soak, token: str, follower: Follower, index: int, per_change: int) -> None:
    conn = await timed(socket, soak)
    made = 0  # files this agent's changes put on trunk, or on their way
    version = 0
    while soak.running():
        base = follower.trunk
        if soak.trunk_files < soak.target_files:
            files = [new_file(index, made + k) for k in range(per_change)]
        else:  # trunk is as large as the soak wants it: edit one of its own files
            version += 1
            files = [new_file(index, version % max(1, made), version)]
        preview = await conn.call("facts.preview", {"base": base, "files": files}, token)
        held = None
        if preview["acquire"]:
            held = await conn.call("lease.acquire", {"set": None, "intent": "soak", "ttl_ms": 600_000,
                                                     "items": preview["acquire"]}, token)
        out = await conn.call("change.propose", {"change": None, "base": base, "files": files,
                                                 "claim": claim_from_facts(preview["facts"], "soak")}, token)
        outcome = out["decision"]["outcome"]
        if outcome == "allow":
            try:
                landed = await asyncio.wait_for(follower.waiter(out["change"]), 300)
            except asyncio.TimeoutError:
                landed = None
            if landed:
                soak.integrated.append(time.perf_counter() - soak.t0)
                added = len(out["facts"]["added_files"])
                made += added
                soak.trunk_files += added
            else:
                key = "not integrated within 300 s" if landed is None else "integration refused"
                soak.refused[key] = soak.refused.get(key, 0) + 1
        else:
            key = f"{outcome}: {out['decision']['reasons'][:1]}"
            soak.refused[key] = soak.refused.get(key, 0) + 1
        if held and held.get("set"):
            await conn.call("lease.release", {"set": held["set"]}, token)
    conn.close()


async def heartbeats(socket: Path, soak: Soak, token: str) -> None:
    conn = await timed(socket, soak)
    while soak.running():
        beat = await conn.call("session.heartbeat", {}, token)
        await asyncio.sleep(min(beat["timeout_ms"] / 3000, max(0.0, soak.stop_at - time.perf_counter())))
    conn.close()


async def sampler(pid: int, soak: Soak, follower: Follower) -> None:
    while soak.running():
        now = time.perf_counter() - soak.t0
        soak.rss.append((now, rss_mb(pid)))
        soak.entries.append((now, follower.next))
        await asyncio.sleep(1)


async def run(w: BenchWorker, tokens: list[str], soak: Soak, per_change: int) -> None:
    fconn = await Conn.open(w.socket)
    status = await fconn.call("status", token=w.htoken)
    follower = Follower(fconn, w.htoken, status["trunk"], status["next_seq"])
    following = asyncio.create_task(follower.run())
    sampling = asyncio.create_task(sampler(w.proc.pid, soak, follower))
    await asyncio.gather(*(agent(w.socket, soak, tok, follower, i, per_change) for i, tok in enumerate(tokens)),
                         *(heartbeats(w.socket, soak, tok) for tok in tokens))
    await sampling
    following.cancel()
    fconn.close()


def loose_objects(store: Path) -> tuple[int, int]:
    """(loose objects, packs) in a git store."""
    objects = store / "objects"
    loose = sum(len(os.listdir(d)) for d in objects.iterdir() if len(d.name) == 2 and d.is_dir())
    return loose, len(list((objects / "pack").glob("*.pack")))


def minutes(soak: Soak, seconds: float) -> list[dict]:
    rows = []
    for m in range(max(1, int(seconds // MINUTE_S))):
        lo, hi = m * MINUTE_S, (m + 1) * MINUTE_S
        lat = [ms for t, _, ms in soak.requests if lo <= t < hi]
        by = {meth: [ms for t, x, ms in soak.requests if lo <= t < hi and x == meth]
              for meth in ("facts.preview", "change.propose")}
        rss = [mb for t, mb in soak.rss if lo <= t < hi]
        seqs = [s for t, s in soak.entries if lo <= t < hi]
        rows.append({"minute": m + 1, "requests": len(lat), "p50": pct(lat, 50), "p99": pct(lat, 99),
                     "preview p99": pct(by["facts.preview"], 99), "propose p99": pct(by["change.propose"], 99),
                     "integrated": sum(1 for t in soak.integrated if lo <= t < hi),
                     "entries": seqs[-1] - 1 if seqs else 0, "rss": rss[-1] if rss else float("nan"),
                     "rss max": max(rss) if rss else float("nan")})
    return rows


def main() -> None:
    seconds = float(os.environ.get("BENCH_SOAK_SECONDS", "600"))
    n_agents = int(os.environ.get("BENCH_SOAK_AGENTS", "32"))
    target = int(os.environ.get("BENCH_SOAK_FILES", str(TARGET_FILES_DEFAULT)))
    base_files = int(os.environ.get("BENCH_SOAK_BASE_FILES", "1000"))
    per_change = int(os.environ.get("BENCH_SOAK_FILES_PER_CHANGE", "1"))
    tmp = Path(tempfile.mkdtemp(prefix="lonca-bench-soak-"))
    try:
        build(tmp / "src.git", base_files)
        w = BenchWorker(output=tmp / "worker.out")
        try:
            w.init_repo("bench", import_from=str(tmp / "src.git"))
            tokens = w.start_sessions(n_agents)
            rss_start = rss_mb(w.proc.pid)
            t0 = time.perf_counter()
            soak = Soak(t0, t0 + seconds, base_files, target)
            asyncio.run(run(w, tokens, soak, per_change))
            elapsed = time.perf_counter() - t0
            loose, packs = loose_objects(w.tmp / "home" / "repos" / "bench.git")
            load = os.getloadavg()
        finally:
            w.stop()
            shutil.rmtree(w.tmp, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = minutes(soak, seconds)
    print(f"{n_agents} agents, {elapsed:.0f} s, {len(soak.integrated)} changes integrated, trunk {soak.trunk_files} "
          f"files (from {base_files}, target {target}, {per_change} new files a change); load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f}")
    print(f"{'minute':>6} {'requests':>9} {'p50 ms':>8} {'p99 ms':>8} {'preview p99':>12} {'propose p99':>12} "
          f"{'integrated':>11} {'log entries':>12} {'RSS MB':>8} {'RSS max':>8}")
    for r in rows:
        print(f"{r['minute']:>6} {r['requests']:>9} {r['p50']:8.1f} {r['p99']:8.1f} {r['preview p99']:12.1f} "
              f"{r['propose p99']:12.1f} {r['integrated']:>11} {r['entries']:>12} {r['rss']:8.1f} {r['rss max']:8.1f}")
    first, last = rows[0], rows[-1]
    half = rows[(len(rows) - 1) // 2]
    print(f"{'figure':<52} {'value':>10} {'baseline':>10} {'ratio':>7}  target")
    for name, value, base, goal in [
        ("p99 ms, last minute vs first", last["p99"], first["p99"], "<= 2.0x"),
        ("worker RSS MB, end vs half-way", last["rss"], half["rss"], "levels off (~1.0x), < 300"),
        ("worker RSS MB, end vs before the soak", last["rss"], rss_start, "-"),
    ]:
        print(f"{name:<52} {value:10.1f} {base:10.1f} {value / base:7.2f}  {goal}")
    print(f"store: {loose} loose objects, {packs} packs (packed in the background); "
          f"rate_limited answers waited out: {soak.throttled}")
    if soak.refused:
        print(f"not integrated: {soak.refused}", file=sys.stderr)


if __name__ == "__main__":
    main()
