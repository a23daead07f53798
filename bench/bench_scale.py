"""Team-scale repositories (`python -m bench scale`, issue 18).

A generated repository (bench/scale_repo.py: deterministic, written as git objects with pygit2)
is imported into a real worker; 50 agents each run facts.preview -> lease.acquire ->
change.propose -> wait for the integration -> lease.release on one-function changes, 500 in
all, while one more connection pings every 20 ms and the worker (bench/profiled_worker.py)
notes how late its event loop runs a callback asked every 2 ms (its lag). Then `tree`, a trunk move's re-warm (from
the worker's log), a restart that warms from the tables on disk, and a stop while a warm from
scratch runs.

Sizes: BENCH_SCALE_FILES (default "2000,100000"; "2000,20000" where 100 000 takes too long).
BENCH_SCALE_CHANGES (default 500) and BENCH_SCALE_AGENTS (default 50). BENCH_REPEAT (default 1):
the workload run that many times at each size, each on a fresh worker importing the one repository
generated for that size; every run's figures are printed, then their median (single runs on a
shared 2-core machine swing 2-4x, so a pair of branch and base is read from medians).
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.procstat import cpu_s, rss_peak_mb
from bench.scale_repo import build, path_of, source
from bench.worker import BenchWorker, median, median_known, own_lag, pct, python_speed_s
from lonca.async_client import AsyncClient
from lonca.client import wait_until_answering
from lonca.protocol import claim_from_facts

TARGETS = {
    "integrations/s": ">= 60 (2k), >= 10 (100k)", "queued -> integrated p95 (s)": "< 2",
    "ping p99 during integrations (ms)": "< 50", "ping max during integrations (ms)": "< 250",
    "facts.preview p95 (ms)": "< 30", "re-warm after a trunk move, median (ms)": "< 200",
    "restart: warm from disk (s)": "< 10", "worker RSS peak (MB)": "< 2048", "tree, whole (ms)": "< 300",
    "tree, one path (ms)": "< 300", "re-warm after a trunk move, p95 (ms)": "< 200", "stop while warming (s)": "< 2", "ping max during the first warm (ms)": "< 250",
}


class Conn:
    """One connection of the project's asyncio client, one request at a time: it sends again after
    the daemon's `closed` eviction, which a bench running beside many more connections meets."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    @classmethod
    async def open(cls, socket: Path) -> "Conn":
        client = AsyncClient(socket, timeout=300)
        await client.connect()
        return cls(client)

    async def call(self, method: str, params: dict | None = None, token: str | None = None,
                   repo: str | None = "bench"):
        return await self.client.call(method, params, repo=repo, token=token)

    def close(self) -> None:
        self.client.close()


class Follower:
    """Follows the log: the newest trunk, and a future per change for its integration."""

    def __init__(self, conn: Conn, token: str, trunk: str, start: int) -> None:
        self.conn, self.token, self.trunk, self.next = conn, token, trunk, start
        self.done: dict[str, asyncio.Future] = {}
        self.proposed_ms: dict[str, int] = {}
        self.integrated_ms: dict[str, int] = {}

    def waiter(self, change: str) -> asyncio.Future:
        return self.done.setdefault(change, asyncio.get_running_loop().create_future())

    async def run(self) -> None:
        while True:
            rows = await self.conn.call("log", {"from": self.next, "wait_ms": 5000}, self.token)
            for row in rows:
                e = row["entry"]
                self.next = e["seq"] + 1
                op = e["op"]
                if op["op"] == "change.propose":
                    self.proposed_ms[op["change"]] = e["time_ms"]
                elif op["op"] in ("change.integrate", "change.integrate_batch"):
                    merged = [[op["change"], op["merged"]]] if op["op"] == "change.integrate" else op["merged"]
                    for cid, commit in merged:
                        ok = e["decision"]["outcome"] == "allow"
                        if ok:
                            self.trunk = commit
                            self.integrated_ms[cid] = e["time_ms"]
                        fut = self.waiter(cid)
                        if not fut.done():
                            fut.set_result(ok)


def change_files(i: int, version: int) -> list[dict]:
    return [{"path": path_of(i), "content_b64": base64.b64encode(source(i, version)).decode(), "mode": None}]


async def agent(socket: Path, token: str, follower: Follower, files: list[int],
                previews: list[tuple[int, float]]) -> int:
    """`previews`: (the agent's change number, ms) of each facts.preview it sent."""
    conn = await Conn.open(socket)
    landed = 0
    for n, i in enumerate(files):
        base = follower.trunk
        changes = change_files(i, n + 1)
        t = time.perf_counter()
        facts = (await conn.call("facts.preview", {"base": base, "files": changes}, token))["facts"]
        previews.append((n, (time.perf_counter() - t) * 1000))
        held = await conn.call("lease.acquire", {"set": None, "intent": "bench edit", "ttl_ms": 600_000,
                                                 "items": [{"symbol": s, "kind": "edit"} for s in facts["edits"]]}, token)
        out = await conn.call("change.propose", {"change": None, "base": base, "files": changes,
                                                 "claim": claim_from_facts(facts, "bench edit")}, token)
        if out["decision"]["outcome"] != "allow":
            raise RuntimeError(f"a proposal was denied: {out['decision']}")
        landed += bool(await asyncio.wait_for(follower.waiter(out["change"]), 300))
        if held.get("set"):
            await conn.call("lease.release", {"set": held["set"]}, token)
    conn.close()
    return landed


async def integrations(w: BenchWorker, tokens: list[str], n_files: int, n_changes: int, first_file: int = 0) -> dict:
    """`first_file` shifts the files edited, so a second run on one worker changes others."""
    socket = w.socket
    fconn = await Conn.open(socket)
    trunk = (await fconn.call("status", token=w.htoken))["trunk"]
    start = len(await fconn.call("log", {"from": 1, "limit": 1000}, w.htoken)) + 1
    follower = Follower(fconn, w.htoken, trunk, start)
    following = asyncio.create_task(follower.run())
    per = n_changes // len(tokens)
    step = max(1, n_files // (per * len(tokens)))
    previews: list[tuple[int, float]] = []
    pinger = Pinger(socket)
    lag: list[list[float]] = []
    lagging = asyncio.create_task(own_lag(lag))
    t0, cpu0 = time.perf_counter(), time.process_time()
    landed = await asyncio.gather(*(agent(socket, tok, follower, [(a * per + k) * step + first_file for k in range(per)], previews)
                                    for a, tok in enumerate(tokens)))
    elapsed = time.perf_counter() - t0
    agents_cpu = (time.process_time() - cpu0) / elapsed
    lagging.cancel()
    waits = pinger.stop()
    following.cancel()
    fconn.close()
    lat = [(follower.integrated_ms[c] - follower.proposed_ms[c]) / 1000
           for c in follower.integrated_ms if c in follower.proposed_ms]
    return {"integrations/s": sum(landed) / elapsed, "queued -> integrated p95 (s)": pct(lat, 95),
            "ping p99 during integrations (ms)": pct(waits, 99), "ping max during integrations (ms)": max(waits),
            "facts.preview p95 (ms)": pct([ms for _, ms in previews], 95),
            # the agents' first previews are sent at once, and served one after another: a
            # tenth of all previews, which by themselves can set the p95
            "  of the agents' first previews, p50 (ms)": pct([ms for n, ms in previews if n == 0], 50),
            "  of the others, p95 (ms)": pct([ms for n, ms in previews if n > 0], 95),
            # the agents' process measures the previews: its own lateness is in them
            "  the agents' own loop lag p99 (ms)": pct([ms for _, ms in lag], 99),
            "  the agents' process, cores": agents_cpu,
            "_landed": sum(landed), "_elapsed": elapsed}


_PING = """
import json, sys, time
from lonca.client import Client
waits = []
with Client(sys.argv[1]) as c:
    c.call("ping")
    print("ready", flush=True)                  # started and answered: the bench's workload may begin
    while not sys.stdin.readline().strip():     # the bench writes a line to stop
        t = time.perf_counter()
        c.call("ping")
        waits.append((time.perf_counter() - t) * 1000)
print(json.dumps(waits))
"""


class Pinger:
    """Pings every 20 ms from a process of its own: the bench's own loop, busy with 50 agents,
    would otherwise add its waits to the worker's."""

    def __init__(self, socket: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _PING, str(socket)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        # its interpreter's start (~0.1 s of a core) ran beside the agents' first previews
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the bench's pinger did not start")
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._stopped = threading.Event()
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stopped.wait(0.02):
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return

    def stop(self) -> list[float]:
        self._stopped.set()
        self._ticker.join()
        return json.loads(self.proc.communicate("stop\n", timeout=60)[0])


def warm_lines(log: Path) -> list[tuple[str, float, float]]:
    """(what, ms, ms of CPU) of each "warmed base" line of the worker's output."""
    found = re.findall(r"warmed base \w+ of \w+: (.*?), (\d+) ms \((\d+) ms of CPU\)", log.read_text(errors="replace"))
    return [(what, float(ms), float(cpu)) for what, ms, cpu in found]


def wait_for_warm(log: Path, count: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while len(warm_lines(log)) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def timed_stop(w: BenchWorker) -> float:
    t = time.perf_counter()
    w.proc.send_signal(signal.SIGTERM)
    w.proc.wait(120)
    return time.perf_counter() - t


def restart(w: BenchWorker) -> float:
    t = time.perf_counter()
    w.proc = subprocess.Popen([sys.executable, "-m", "lonca", "daemon"], env=w.env,
                              stdout=open(w.output, "ab"), stderr=subprocess.STDOUT)
    if wait_until_answering(w.proc, w.socket, 120):
        raise RuntimeError("the worker did not restart")
    return time.perf_counter() - t


def tree_ms(w: BenchWorker, trunk: str, paths: list[str] | None) -> float:
    with w.client() as c:
        c.call("tree", {"commit": trunk, "paths": paths}, repo="bench", token=w.htoken)   # the map, once
        times = []
        for _ in range(5):
            t = time.perf_counter()
            c.call("tree", {"commit": trunk, "paths": paths}, repo="bench", token=w.htoken)
            times.append((time.perf_counter() - t) * 1000)
    return median(times)


def one_size(n_files: int, n_changes: int, n_agents: int, repeat: int = 1) -> list[dict]:
    """The figures of `repeat` runs on one repository of `n_files` generated for them."""
    tmp = Path(tempfile.mkdtemp(prefix="lonca-bench-scale-"))
    try:
        t = time.perf_counter()
        build(tmp / "src.git", n_files)
        generated = time.perf_counter() - t
        runs = []
        for k in range(repeat):
            runs.append(one_run(tmp, n_files, n_changes, n_agents, {"generate the repository (s)": generated}))
            print(f"  {n_files} files, run {k + 1} of {repeat}: {runs[-1]['_landed']} of {n_changes} integrated in "
                  f"{runs[-1]['_elapsed']:.1f} s", file=sys.stderr, flush=True)
        return runs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def one_run(tmp: Path, n_files: int, n_changes: int, n_agents: int, out: dict) -> dict:
    """One worker on a fresh home importing `tmp`/src.git: the workload, then its figures in `out`."""
    for f in ("worker.out", "profile.json"):
        (tmp / f).unlink(missing_ok=True)
    w = BenchWorker(output=tmp / "worker.out", profile=tmp / "profile.json")
    try:
        t = time.perf_counter()
        w.init_repo("bench", import_from=str(tmp / "src.git"))
        out["import (s)"] = time.perf_counter() - t
        tokens = w.start_sessions(n_agents)
        t = time.perf_counter()
        with w.client() as c:
            trunk = c.call("status", repo="bench", token=w.htoken)["trunk"]
            first = change_files(1, 99)
            c.call("facts.preview", {"base": trunk, "files": first}, repo="bench", token=tokens[0])
        pinger = Pinger(w.socket)
        warmed = wait_for_warm(w.output, 1, 1800)
        pings = pinger.stop()
        out["first warm, from scratch (s)"] = time.perf_counter() - t if warmed else float("nan")
        out["first warm, from scratch, its CPU (s)"] = warm_lines(w.output)[0][2] / 1000 if warmed else float("nan")
        out["ping max during the first warm (ms)"] = max(pings)
        cpu, kernel = cpu_s(w.proc.pid), cpu_s(w.proc.pid, kernel=True)
        with w.profiling():
            out.update(asyncio.run(integrations(w, tokens, n_files, n_changes)))
        profile = json.loads((tmp / "profile.json").read_text())
        out["event loop lag p99 during integrations (ms)"] = profile["loop_lag_ms"]["p99"]
        out["event loop lag max during integrations (ms)"] = profile["loop_lag_ms"]["max"]
        out["collector's longest pause during integrations (ms)"] = \
            max((g["longest_ms"] for g in profile["gc"].values()), default=0.0)
        full = profile["gc"].get("2", {"count": 0, "longest_ms": 0.0})
        out["  full collections (generation 2)"] = full["count"]
        out["  longest young collection, gen 0-1 (ms)"] = \
            max((g["longest_ms"] for k, g in profile["gc"].items() if k != "2"), default=0.0)
        # a new trunk's map is made by the queue's round, before the move wakes the previews
        out["trunk maps made on the event loop"] = profile["maps_made_near"]
        out["worker CPU per integration (ms)"] = (cpu_s(w.proc.pid) - cpu) * 1000 / max(1, out["_landed"])
        out["  of it in the kernel (ms)"] = (cpu_s(w.proc.pid, kernel=True) - kernel) * 1000 / max(1, out["_landed"])
        time.sleep(1)
        rewarms = [ms for what, ms, _ in warm_lines(w.output) if "changed since" in what]
        out["re-warm after a trunk move, median (ms)"] = median(rewarms) if rewarms else float("nan")
        out["re-warm after a trunk move, p95 (ms)"] = pct(rewarms, 95) if rewarms else float("nan")
        out["re-warms (of integrations)"] = len(rewarms)
        with w.client() as c:
            trunk = c.call("status", repo="bench", token=w.htoken)["trunk"]
        out["tree, whole (ms)"] = tree_ms(w, trunk, None)
        out["tree, one path (ms)"] = tree_ms(w, trunk, [path_of(7)])
        out["worker RSS peak (MB)"] = rss_peak_mb(w.proc.pid)
        out["load average (1 min, machine)"] = os.getloadavg()[0]
        out["10M additions in a Python loop, this machine (ms)"] = python_speed_s() * 1000
        out["stop (s)"] = timed_stop(w)
        before = len(warm_lines(w.output))
        out["restart: answering (s)"] = restart(w)
        t = time.perf_counter()
        if wait_for_warm(w.output, before + 1, 600):
            out["restart: warm from disk (s)"] = time.perf_counter() - t + out["restart: answering (s)"]
            out["restart: warm from disk, its CPU (s)"] = warm_lines(w.output)[-1][2] / 1000
        out["worker RSS after restart warm (MB)"] = rss_peak_mb(w.proc.pid)
        timed_stop(w)
        for f in (w.tmp / "home").glob("symbols.db*"):
            f.unlink()
        restart(w)
        time.sleep(1.0)     # a warm from scratch is running (the tables on disk are gone)
        out["stop while warming (s)"] = timed_stop(w)
    finally:
        if w.proc.poll() is None:
            w.stop()
        shutil.rmtree(w.tmp, ignore_errors=True)
    return out


def main() -> None:
    sizes = [int(x) for x in os.environ.get("BENCH_SCALE_FILES", "2000,100000").split(",")]
    n_changes = int(os.environ.get("BENCH_SCALE_CHANGES", "500"))
    n_agents = int(os.environ.get("BENCH_SCALE_AGENTS", "50"))
    repeat = int(os.environ.get("BENCH_REPEAT", "1"))
    runs = {n: one_size(n, n_changes, n_agents, repeat) for n in sizes}
    # one column a size (one run), or each run's and then their median
    columns = []
    for n in sizes:
        if repeat == 1:
            columns.append((f"{n} files", runs[n]))
        else:
            columns += [(f"{n} #{k + 1}", [run]) for k, run in enumerate(runs[n])] + [(f"{n} median", runs[n])]
    names = [k for k in runs[sizes[0]][0] if not k.startswith("_")]
    print(f"{'figure (' + str(n_agents) + ' agents, ' + str(n_changes) + ' changes)':<46}"
          + "".join(f"{title:>14}" for title, _ in columns) + "  target")
    for name in names:
        print(f"{name:<46}" + "".join(f"{median_known([r.get(name, float('nan')) for r in rs]):14.1f}" for _, rs in columns)
              + f"  {TARGETS.get(name, '')}")


if __name__ == "__main__":
    main()
