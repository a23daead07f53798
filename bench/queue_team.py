"""The queue at team scale (issue 15's benchmark, part of `python -m bench queue`).

256 changes, 70 % independent by their symbols (each edits a module of its own) and 30 % in
dependent runs (each edits its own function of one of 8 shared modules: a common path, hence one
lane), 10 % failing their check, all proposed on one base. The check is a real subprocess that
sleeps T and fails when the candidate's tree holds a change marked BAD
(`sh -c "sleep T; ! grep -rqs BAD ."`). Everything goes through a real worker: agents' sessions,
facts.preview, leases, change.propose, the worker's queue and its check runners; the figures are
read from the log (each change's `change.propose` time to its integration's).

Arrivals are open-loop at the ideal rate, one change every T / runners (runners / T changes a
second): a queue that keeps up then shows a throughput near the ideal and a p95 of a few T; one
that does not falls behind, and its p95 grows with the queue. Throughput is the 256 decided
changes (landed or rejected) over the time from the first `queued` to the last decision.

Strategies, each a policy of the same worker ([queue] runners, speculate):
  (a) today's single batch and bisection: runners = 1, whatever the machines have;
  (b) lanes only: runners = N, speculate = false (lanes verified in parallel, a failing run
      bisected one prefix at a time);
  (c) lanes and speculation: runners = N, speculate = true, and [queue] rounds at its default,
      "screened" (one wave a round: fresh lanes screened in groups sized by the failure rate,
      what a wave cleared landing as one tree in the next; docs/decisions.md, "Screened rounds").
With one runner the three are one policy (lanes need a second runner), run once.

The runners are the worker's embedded subprocess runner with N slots by default, or N Celery
runner processes (`lonca runner --concurrency 1`, BENCH_QUEUE_RUNNER=celery) on the broker of
LONCA_CELERY_BROKER. Settings: BENCH_QUEUE_T (seconds, default 1), BENCH_QUEUE_RUNNERS ("1,4,8"),
BENCH_QUEUE_CHANGES (256), BENCH_QUEUE_BATCH (the policy's batch_size, 16: the default),
BENCH_QUEUE_STRATEGIES ("abc").
"""
from __future__ import annotations

import asyncio
import base64
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from bench.bench_scale import Conn
from bench.procstat import cpu_s
from bench.scale_repo import build, commit_edits, path_of, source
from bench.worker import BenchWorker, pct
from lonca.protocol import claim_from_facts

HOT_FILES, HOT_FUNCTIONS = 8, 16
AGENTS = 32
SHARE_INDEPENDENT, SHARE_FAILING = 0.70, 0.10


def hot_path(k: int) -> str:
    return f"hot/h{k}.py"


def hot_source(k: int, edited: dict[int, str] | None = None) -> bytes:
    """Shared module k: HOT_FUNCTIONS functions far enough apart that edits of two merge."""
    edited = edited or {}
    parts = [f'"""Shared module {k}."""\n']
    for j in range(HOT_FUNCTIONS):
        parts.append(f"\n\ndef g{j}(x):\n    y = x + {j}\n    z = y * 2\n    return {edited.get(j, 'z')}\n")
    return "".join(parts).encode()


@dataclass(frozen=True)
class Change:
    index: int
    path: str
    text: bytes
    failing: bool


def workload(n: int, seed: int = 15) -> list[Change]:
    """n changes in queue order: 70 % independent, the rest spread over the shared modules (at
    most HOT_FUNCTIONS each), 10 % failing, shuffled with a fixed seed."""
    rng = random.Random(seed)
    dependent = n - round(n * SHARE_INDEPENDENT)
    if dependent > HOT_FILES * HOT_FUNCTIONS:
        raise ValueError("more dependent changes than shared functions")
    kinds = ["own"] * (n - dependent) + [f"hot{j % HOT_FILES}:{j // HOT_FILES}" for j in range(dependent)]
    rng.shuffle(kinds)
    failing = set(rng.sample(range(n), round(n * SHARE_FAILING)))
    out = []
    for i, kind in enumerate(kinds):
        mark = "  # BAD" if i in failing else ""
        if kind == "own":
            text = source(i, version=1).replace(b"return total + 1\n", f"return total + 1{mark}\n".encode())
            out.append(Change(i, path_of(i), text, i in failing))
        else:
            k, j = (int(x) for x in kind[3:].split(":"))
            out.append(Change(i, hot_path(k), hot_source(k, {j: f"z - {i}{mark}"}), i in failing))
    return out


def source_repo(path: Path, n: int) -> None:
    """The imported repository: the modules of the independent changes and the shared ones."""
    repo = build(path, n)
    head = str(repo.references["refs/heads/main"].target)
    top = commit_edits(repo, head, {hot_path(k): hot_source(k) for k in range(HOT_FILES)}, "shared modules\n")
    repo.references["refs/heads/main"].set_target(top)


def policy(t: float, runners: int, speculate: bool, runner: str, trace: Path, batch: int) -> str:
    """The check sleeps T, notes its start and end in `trace` (outside the tree: how many checks
    ran and how busy the runners were), and fails on a tree holding BAD."""
    script = f's=$(date +%s.%N); sleep {t:g}; echo $s $(date +%s.%N) >> {trace}; ! grep -rqs BAD .'
    check = f'["sh", "-c", "{script}"]'
    return (f"[verification]\ntests = {check}\nbatch_size = {batch}\ntimeout_s = {int(t * 10) + 30}\n"
            f"[queue]\nrunners = {runners}\nspeculate = {'true' if speculate else 'false'}\nrunner = \"{runner}\"\n"
            "[leases]\ntimeout_ms = 3600000\n[sessions]\nops_per_minute = 100000\n")


@dataclass
class Result:
    runners: int
    strategy: str
    proposed: int
    landed: int
    rejected: int
    makespan_s: float
    latencies_s: list[float]    # queued -> integrated, of each landed change
    rounds: int                 # integration entries (batches landed and single decisions)
    checks: int                 # check processes that ran
    busy: float                 # their time over runners x makespan
    worker_cpu_s: float         # the worker's own CPU time (user + system) over the run
    green: bool                 # every landed tree has passing attestations of exactly that tree
    right: bool                 # landed = the passing changes, rejected = the failing ones
    load: float

    @property
    def per_minute(self) -> float:
        return (self.landed + self.rejected) / self.makespan_s * 60

    @property
    def p95(self) -> float:
        return pct(self.latencies_s, 95)


async def _prepare(w: BenchWorker, repo: str, tokens: list[str], base: str, changes: list[Change]) -> list[dict]:
    """Each change's facts.preview and lease, before the clock: the proposal is what arrives."""
    conns = [await Conn.open(w.socket) for _ in tokens]
    params: list[dict] = [{} for _ in changes]

    async def agent(a: int) -> None:
        for ch in changes[a::len(tokens)]:
            files = [{"path": ch.path, "content_b64": base64.b64encode(ch.text).decode(), "mode": None}]
            preview = await conns[a].call("facts.preview", {"base": base, "files": files}, tokens[a], repo=repo)
            if preview["acquire"]:
                await conns[a].call("lease.acquire", {"set": None, "intent": "bench", "ttl_ms": 3_000_000,
                                                      "items": preview["acquire"]}, tokens[a], repo=repo)
            params[ch.index] = {"change": None, "base": base, "files": files,
                                "claim": claim_from_facts(preview["facts"], f"change {ch.index}")}
    await asyncio.gather(*(agent(a) for a in range(len(tokens))))
    for c in conns:
        c.close()
    return params


async def _arrive(w: BenchWorker, repo: str, tokens: list[str], params: list[dict], gap_s: float) -> list[str]:
    """Proposes change i at i * gap_s, open loop (a pool of connections, so a slow answer does not
    hold the next arrival back). Returns the change ids in order."""
    pool: asyncio.Queue = asyncio.Queue()
    for _ in range(16):
        pool.put_nowait(await Conn.open(w.socket))
    ids = [""] * len(params)
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        await asyncio.sleep(max(0.0, t0 + i * gap_s - time.perf_counter()))
        conn = await pool.get()
        try:
            out = await conn.call("change.propose", params[i], tokens[i % len(tokens)], repo=repo)
        finally:
            pool.put_nowait(conn)
        if out["decision"]["outcome"] != "allow":
            raise RuntimeError(f"change {i} was not queued: {out['decision']}")
        ids[i] = out["change"]
    await asyncio.gather(*(one(i) for i in range(len(params))))
    while not pool.empty():
        pool.get_nowait().close()
    return ids


async def _decisions(w: BenchWorker, repo: str, start: int, ids: set[str], timeout_s: float) -> list[dict]:
    """The log's entries from `start` until every change in `ids` is decided."""
    conn = await Conn.open(w.socket)
    entries: list[dict] = []
    undecided, seq = set(ids), start
    deadline = time.perf_counter() + timeout_s
    while undecided and time.perf_counter() < deadline:
        rows = await conn.call("log", {"from": seq, "wait_ms": 2000}, w.htoken, repo=repo)
        for row in rows:
            e = row["entry"]
            seq = e["seq"] + 1
            entries.append(e)
            op = e["op"]
            if op["op"] == "change.integrate":
                undecided.discard(op["change"])
            elif op["op"] == "change.integrate_batch":
                undecided.difference_update(cid for cid, _ in op["merged"])
    conn.close()
    if undecided:
        raise RuntimeError(f"{len(undecided)} changes undecided after {timeout_s:.0f} s")
    return entries


def _green(store: pygit2.Repository, entry: dict) -> bool:
    op = entry["op"]
    head = op["merged"] if op["op"] == "change.integrate" else op["merged"][-1][1]
    tree = str(store[head].peel(pygit2.Commit).tree_id)
    finals = [a for a in entry["evidence"] if a["details"].get("attempt") == a["details"].get("attempts")]
    return bool(finals) and all(a["subject_tree"] == tree and a["result"] == "pass" for a in finals)


def run_one(w: BenchWorker, src: Path, changes: list[Change], t: float, runners: int, strategy: str,
            runner: str) -> Result:
    repo = f"q{runners}{strategy}"
    w.init_repo(repo, import_from=str(src))
    trace = w.tmp / f"checks-{repo}.txt"
    batch = int(os.environ.get("BENCH_QUEUE_BATCH", "16"))
    w.policy(policy(t, runners if strategy != "a" else 1, strategy == "c", runner, trace, batch), repo=repo)
    tokens = w.start_sessions(AGENTS, repo=repo)
    with w.client() as c:
        status = c.call("status", {}, repo=repo, token=w.htoken)
    base, start = status["trunk"], status["next_seq"]

    cpu_before = 0.0

    async def drive() -> tuple[list[str], list[dict]]:
        nonlocal cpu_before
        params = await _prepare(w, repo, tokens, base, changes)
        cpu_before = cpu_s(w.proc.pid)     # from the first proposal: previews and leases are not the queue's
        ids = await _arrive(w, repo, tokens, params, t / runners)
        return ids, await _decisions(w, repo, start, set(ids), timeout_s=60 + 40 * len(changes) * t)
    ids, entries = asyncio.run(drive())
    cpu = cpu_s(w.proc.pid) - cpu_before
    load = os.getloadavg()[0]
    proposed = {e["op"]["change"]: e["time_ms"] for e in entries if e["op"]["op"] == "change.propose"}
    landed: dict[str, int] = {}
    rejected: set[str] = set()
    green = True
    store = pygit2.Repository(str(w.tmp / "home" / "repos" / f"{repo}.git"))
    decisions = [e for e in entries if e["op"]["op"] in ("change.integrate", "change.integrate_batch")]
    for e in decisions:
        ok = e["decision"]["outcome"] == "allow"
        if e["op"]["op"] == "change.integrate" and not ok:
            rejected.add(e["op"]["change"])
            continue
        green = green and _green(store, e)
        merged = [e["op"]["change"]] if e["op"]["op"] == "change.integrate" else [cid for cid, _ in e["op"]["merged"]]
        landed.update((cid, e["time_ms"]) for cid in merged)
    failing = {ids[ch.index] for ch in changes if ch.failing}
    right = rejected == failing and set(landed) == set(ids) - failing
    first = min(proposed[i] for i in ids)
    last = max(e["time_ms"] for e in decisions)
    spans = [tuple(map(float, line.split())) for line in trace.read_text().splitlines()] if trace.exists() else []
    makespan = (last - first) / 1000
    if os.environ.get("BENCH_QUEUE_TRACE"):
        _trace(repo, entries, proposed, first, spans)
    return Result(runners, strategy, len(ids), len(landed), len(rejected), makespan,
                  [(ms - proposed[cid]) / 1000 for cid, ms in landed.items()], len(decisions),
                  len(spans), sum(b - a for a, b in spans) / (runners * makespan), cpu, green, right, load)


def _trace(repo: str, entries: list[dict], proposed: dict[str, int], first: int,
           spans: list[tuple[float, ...]]) -> None:
    """The queue's decisions in time (BENCH_QUEUE_TRACE=1): seconds in, what was decided, and how
    many changes were queued and undecided then; between them, the checks that started (their
    start and end, seconds in): a gap between one wave's ends and the next one's starts is the
    queue's overhead."""
    decided = 0
    starts = sorted((a - first / 1000, b - first / 1000) for a, b in spans)
    for e in entries:
        while starts and starts[0][0] <= (e["time_ms"] - first) / 1000:
            a, b = starts.pop(0)
            print(f"  {repo} {a:7.2f} s  check until {b:7.2f} s", file=sys.stderr)
        op = e["op"]
        if op["op"] not in ("change.integrate", "change.integrate_batch"):
            continue
        n = len(op["merged"]) if op["op"] == "change.integrate_batch" else 1
        what = "landed" if e["decision"]["outcome"] == "allow" else "rejected"
        waiting = sum(1 for ms in proposed.values() if ms <= e["time_ms"]) - decided
        decided += n
        print(f"  {repo} {(e['time_ms'] - first) / 1000:7.2f} s  {what} {n:>2}  queued before: {waiting}",
              file=sys.stderr)


class CeleryRunners:
    """N `lonca runner --concurrency 1` processes, each with a cleared environment and a home of
    its own (as tests/test_queue_celery.py starts them)."""

    def __init__(self, tmp: Path, n: int) -> None:
        self.procs: list[subprocess.Popen] = []
        env = {"PATH": "/usr/bin:/bin"}
        if os.environ.get("LONCA_CELERY_BROKER"):
            env["LONCA_CELERY_BROKER"] = os.environ["LONCA_CELERY_BROKER"]
        homes = []
        for i in range(n):
            home = tmp / f"runner-{n}-{i}"
            home.mkdir(parents=True)
            homes.append(home)
            out = open(home / "out.txt", "wb")
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "lonca", "runner", "--concurrency", "1"], cwd=home,
                env={**env, "HOME": str(home)}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.time() + 180
        for proc, home in zip(self.procs, homes):
            while b" ready." not in (home / "out.txt").read_bytes():
                if proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError((home / "out.txt").read_text())
                time.sleep(0.2)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def simulated_submitqueue(changes: list[Change], t: float, runners: int) -> tuple[float, float]:
    """SubmitQueue-style linear speculation, SIMULATED: an event simulation over the same workload,
    T and arrivals, with no worker, no git and no cost but T (an upper bound for a real queue).

    The model (Zuul's dependent pipeline, SubmitQueue with a linear speculation graph and no
    conflict analyzer): every change is checked on the speculative head, trunk plus every change
    ahead of it still pending (assumed to pass), as soon as a runner is free (the change nearest
    the queue's head first; its build holds what is pending ahead when it starts). A build fails when the change
    or any change it holds fails. The queue's head lands when its build passed, and is rejected
    when its build failed on a head of only landed changes; a rejected change resets every build
    that held it (a running one frees its runner) and those are checked again. Returns (decided
    changes a minute, p95 queued -> integrated in seconds, of the landed changes)."""
    import heapq

    n, gap = len(changes), t / runners
    pending: list[int] = []
    held: dict[int, set[int]] = {}      # change -> the changes its current build holds
    result: dict[int, bool] = {}        # change -> its current build's verdict, once it ended
    running: dict[int, int] = {}        # change -> the token of its running build
    waiting: list[int] = []             # changes waiting for a runner
    events: list[tuple[float, int, int, int]] = [(i * gap, 0, i, 0) for i in range(n)]  # (time, kind, change, token)
    heapq.heapify(events)
    free, token, now = runners, 0, 0.0
    decided: dict[int, float] = {}
    rejected: set[int] = set()

    def start() -> None:
        nonlocal free, token
        while free and waiting:
            i = min(waiting, key=pending.index)     # the change nearest the head first
            waiting.remove(i)
            free -= 1
            token += 1
            held[i] = set(pending[:pending.index(i)])
            running[i] = token
            heapq.heappush(events, (now + t, 1, i, token))

    def reset(i: int) -> None:
        nonlocal free
        if i in running:
            del running[i]
            free += 1
        result.pop(i, None)
        if i not in waiting:
            waiting.append(i)

    while events:
        now, kind, i, tok = heapq.heappop(events)
        if kind == 0:                   # arrives
            pending.append(i)
            waiting.append(i)
        elif running.get(i) == tok:     # its build ended (not reset meanwhile)
            del running[i]
            free += 1
            result[i] = not changes[i].failing and not any(changes[j].failing for j in held[i])
        while pending and pending[0] in result:
            h = pending.pop(0)
            decided[h] = now
            if not result[h]:
                rejected.add(h)
                for j in pending:
                    if h in held.get(j, ()) and (j in running or j in result):
                        reset(j)
        start()
    arrive = {i: i * gap for i in range(n)}
    latencies = [decided[i] - arrive[i] for i in range(n) if i not in rejected]
    return n / (max(decided.values()) - arrive[0]) * 60, pct(latencies, 95)


def team_table() -> None:
    t = float(os.environ.get("BENCH_QUEUE_T", "1"))
    counts = [int(x) for x in os.environ.get("BENCH_QUEUE_RUNNERS", "1,4,8").split(",")]
    n = int(os.environ.get("BENCH_QUEUE_CHANGES", "256"))
    runner = os.environ.get("BENCH_QUEUE_RUNNER", "embedded")
    strategies = os.environ.get("BENCH_QUEUE_STRATEGIES", "abc")
    changes = workload(n)
    began = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="lonca-bench-team-"))
    results: list[Result] = []
    try:
        source_repo(tmp / "src.git", n)
        w = BenchWorker(output=tmp / "worker.out")
        try:
            for r in counts:
                pool = CeleryRunners(tmp, r) if runner == "celery" else None
                try:
                    for strategy in [x for x in strategies if r > 1 or x == "a"]:
                        results.append(run_one(w, tmp / "src.git", changes, t, r, strategy, runner))
                        res = results[-1]
                        print(f"  runners {r} ({strategy}): {res.per_minute:.0f}/min, p95 {res.p95:.1f} s, "
                              f"load {res.load:.1f}", file=sys.stderr, flush=True)
                finally:
                    if pool:
                        pool.stop()
        finally:
            w.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - began
    _print(results, changes, t, runner, elapsed)


def _print(results: list[Result], changes: list[Change], t: float, runner: str, elapsed: float) -> None:
    how = ("the worker's embedded subprocess runner, N checks at once ([queue] runners = N)" if runner == "embedded"
           else "N Celery runner processes (lonca runner --concurrency 1) over RabbitMQ")
    n, failing = len(changes), sum(ch.failing for ch in changes)
    batch = int(os.environ.get("BENCH_QUEUE_BATCH", "16"))
    print(f"{n} changes ({round(n * SHARE_INDEPENDENT)} independent, {failing} failing), check: a subprocess "
          f"sleeping T = {t:g} s; arrivals open-loop at runners / T; batch_size {batch}; runners: {how}")
    by = {(r.runners, r.strategy): r for r in results}
    top = max(r.runners for r in results)
    head = f"{'runners':>7} {'strategy':<26} {'/min':>6} {'ideal':>6} {'x ideal':>7} {'p95 s':>6} {'p95/T':>6} " \
           f"{'landed':>6} {'rej':>4} {'rounds':>6} {'checks':>6} {'busy':>5} {'cpu/ch':>6} {'ok':>3} {'load':>5}"
    print(head)
    names = {"a": "(a) batch and bisection", "b": "(b) lanes", "c": "(c) lanes + speculation"}
    for r in results:
        ideal = r.runners / t * 60
        name = "(a) = (b) = (c)" if r.runners == 1 else names[r.strategy]
        print(f"{r.runners:>7} {name:<26} {r.per_minute:6.0f} {ideal:6.0f} "
              f"{r.per_minute / ideal:7.2f} {r.p95:6.1f} {r.p95 / t:6.1f} {r.landed:>6} {r.rejected:>4} "
              f"{r.rounds:>6} {r.checks:>6} {r.busy:5.2f} {r.worker_cpu_s / max(1, r.landed + r.rejected) * 1000:6.1f} "
              f"{'yes' if r.green and r.right else 'NO':>3} {r.load:5.1f}")
    for r in sorted({r.runners for r in results}):
        sq, p95 = simulated_submitqueue(changes, t, r)
        ideal = r / t * 60
        print(f"{r:>7} {'SubmitQueue (SIMULATED)':<26} {sq:6.0f} {ideal:6.0f} {sq / ideal:7.2f} {p95:6.1f} "
              f"{p95 / t:6.1f} {'-':>6} {'-':>4} {'-':>6} {'-':>6} {'-':>5} {'-':>6} {'-':>3} {'-':>5}")
    counts = sorted({r.runners for r in results})
    for k, name in names.items():      # one runner is the same policy for all three
        row = [by.get((r, k)) or by.get((r, "a")) if r == 1 else by.get((r, k)) for r in counts]
        if all(row):
            print(f"{name} from {' -> '.join(map(str, counts))} runners: "
                  f"{' -> '.join(f'{x.per_minute:.0f}' for x in row if x)} /min, "
                  f"p95 {' -> '.join(f'{x.p95:.1f}' for x in row if x)} s")
    best = by.get((top, "c"))
    base = by.get((top, "a"))
    if best and base:
        ideal = top / t * 60
        print(f"targets at {top} runners, (c): throughput {best.per_minute / ideal:.2f} x ideal (>= 0.7), "
              f"{best.per_minute / base.per_minute:.2f} x (a) (>= 4), p95 {best.p95 / t:.1f} T (<= 3)")
    print(f"run time {elapsed:.0f} s; ok = every passing change landed once, every failing one rejected, "
          f"each landed tree on passing checks of exactly that tree; cpu/ch = the worker's own CPU ms over "
          f"the run (proposals and logging included) per decided change")
