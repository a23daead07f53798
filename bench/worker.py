"""A real worker for benchmarks: a temporary LONCA_HOME, a repository, a logged-in human, and
connections to drive load."""
import asyncio
import contextlib
import json
import os
import secrets
import selectors
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lonca import humankeys
from lonca.client import wait_until_answering
from lonca.protocol import session_start_op


class BenchWorker:
    def __init__(self, extra_env: dict | None = None, output: Path | None = None, profile: Path | None = None):
        """`output`: a file for the worker's stdout and stderr (its log), else nowhere. `profile`:
        where the worker writes its figures of what runs inside `profiling()`
        (bench/profiled_worker.py)."""
        self.tmp = Path(tempfile.mkdtemp(prefix="lonca-bench-"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LONCA_")}
        # a setting for the worker under test alone: BENCH_LONCA_X=v is its LONCA_X=v (an A/B of
        # one limit on one checkout, say BENCH_LONCA_MAX_CONNS_PER_UID=64); a bare LONCA_X is the
        # caller's own and stays out, as above
        self.env.update({k[len("BENCH_"):]: v for k, v in os.environ.items() if k.startswith("BENCH_LONCA_")})
        self.env.update(LONCA_HOME=str(self.tmp / "home"), LONCA_HUMANS=str(self.tmp / "humans"), **(extra_env or {}))
        os.environ["LONCA_HUMANS"] = self.env["LONCA_HUMANS"]
        self.socket = self.tmp / "home" / "lonca.sock"
        self.output = output
        self.command = ["-m", "lonca", "daemon"]
        if os.environ.get("BENCH_SAMPLE_OUT"):  # its memory sampled (bench/sampled_worker.py)
            self.command = ["-m", "bench.sampled_worker"]
        self.profile = profile
        if profile is not None:
            self.command = ["-m", "bench.profiled_worker"]
            self.env["LONCA_BENCH_PROFILE_OUT"] = str(profile)
            self.env["LONCA_BENCH_CPROFILE"] = os.environ.get("LONCA_BENCH_CPROFILE", "")
        self.start()
        self.key = humankeys.create_key("bench")

    def start(self, timeout_s: float = 120) -> None:
        """(Re)start the worker process on the same home; returns once it answers ping."""
        sink = open(self.output, "ab") if self.output else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, *self.command], env=self.env,
                                     stdout=sink, stderr=subprocess.STDOUT if self.output else subprocess.DEVNULL)
        if wait_until_answering(self.proc, self.socket, timeout_s):
            raise RuntimeError("the bench's worker did not start")

    @contextlib.contextmanager
    def profiling(self):
        """The worker measured over the block (a worker made with `profile`); its figures are
        in that file when the block ends."""
        if self.profile is None:
            yield
            return
        self.profile.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not self.profile.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    def client(self, timeout: float = 60.0):
        from lonca.client import Client
        return Client(self.socket, timeout=timeout)

    def init_repo(self, name: str = "bench", import_from: str | None = None) -> str:
        with self.client(timeout=900) as c:     # a 100 000-file import on a loaded machine takes minutes
            # a second repository of the same worker: asked by the human logged in for the first
            token = getattr(self, "htoken", None)
            p = c.call("repo.prepare_init", {"repo": name, "human": "bench", "human_key": self.key.public,
                                             "import_from": import_from}, token=token)
            c.call("repo.init", {"op": p["op"], "sig": self.key.sign_op(name, p["op"])}, token=token)
            self.htoken = c.call("human.login", {"sig": self.key.sign_login(None, 3_600_000), "ttl_ms": 3_600_000})["token"]
        return name

    def policy(self, text: str, repo: str = "bench") -> None:
        with self.client() as c:
            op = c.call("human.prepare_policy", {"config": text}, repo=repo, token=self.htoken)["op"]
            c.call("human.submit", {"op": op, "sig": self.key.sign_op(repo, op)}, repo=repo, token=self.htoken)

    def start_sessions(self, n: int, repo: str = "bench") -> list[str]:
        tokens = []
        with self.client() as c:
            for i in range(n):
                op = session_start_op(f"s{i}-{secrets.token_hex(3)}", f"agent{i}", int(time.time() * 1000) + 3_600_000,
                                      task="bench")
                tokens.append(c.call("human.submit", {"op": op, "sig": self.key.sign_op(repo, op)}, repo=repo, token=self.htoken)["token"])
        return tokens

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def drive(socket_path: Path, requests: list[list[dict]], duration_s: float) -> tuple[int, list[float]]:
    """One connection per list; each sends its requests round-robin, one at a time (the next once
    the answer to the last one is read), for duration_s. Returns (answers, latencies in ms).
    One thread waiting on every socket at once, with no event loop: the client shares the
    machine's cores with the worker it measures, and asyncio's streams cost it twice the CPU
    a request (bench leases)."""
    latencies: list[float] = []
    count = 0
    conns = {}
    with selectors.DefaultSelector() as sel:
        for reqs in requests:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(socket_path))
            conns[sock.fileno()] = conn = _Conn(sock, [json.dumps(r).encode() + b"\n" for r in reqs])
            sel.register(sock, selectors.EVENT_READ, conn)
        stop_at = time.perf_counter() + duration_s
        for conn in conns.values():
            conn.send()
        open_conns = len(conns)
        while open_conns:
            for key, _ in sel.select():
                conn = key.data
                data = conn.sock.recv(1 << 20)   # readable: answers, or the end
                if not data:
                    raise RuntimeError("the worker closed a connection of the bench")
                conn.buf += data
                while (nl := conn.buf.find(b"\n")) >= 0:
                    latencies.append((time.perf_counter() - conn.sent) * 1000)
                    line = bytes(conn.buf[:nl])
                    del conn.buf[:nl + 1]
                    if not json.loads(line)["ok"]:
                        raise RuntimeError(line)
                    count += 1
                    if time.perf_counter() < stop_at:
                        conn.send()
                    else:
                        sel.unregister(conn.sock)
                        conn.sock.close()
                        open_conns -= 1
    return count, latencies


class _Conn:
    """A bench connection: its requests, the next one's index, what came of the answer so far."""

    def __init__(self, sock: socket.socket, lines: list[bytes]):
        self.sock, self.lines = sock, lines
        self.next = 0
        self.buf = bytearray()
        self.sent = 0.0

    def send(self) -> None:
        self.sent = time.perf_counter()
        self.sock.sendall(self.lines[self.next % len(self.lines)])
        self.next += 1


LAG_TICK_S = 0.005


async def own_lag(samples: list[list[float]]) -> None:
    """How late this process's own event loop runs a task asked every LAG_TICK_S, as [monotonic s,
    ms] pairs, until cancelled: the part of a time measured by a bench's clients that is theirs."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        samples.append([time.monotonic(), (time.perf_counter() - asked - LAG_TICK_S) * 1000])


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def python_speed_s() -> float:
    """Seconds this machine takes for 10 million additions in a Python loop, the best of three:
    printed beside the figures, so that runs on different machines or days can be compared."""
    best = float("inf")
    for _ in range(3):
        t, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t)
    return best


def median_known(values: list[float]) -> float:
    """The median of the runs that have the figure (NaN where a run could not take it), for the
    benches' BENCH_REPEAT."""
    known = [v for v in values if v == v]
    return statistics.median(known) if known else float("nan")


def sqlite_commit_rate(duration_s: float = 3.0) -> float:
    """Single-row durable commits per second: SQLite, WAL, synchronous=FULL, on this disk."""
    d = Path(tempfile.mkdtemp(prefix="lonca-bench-sqlite-"))
    con = sqlite3.connect(d / "base.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    body = "x" * 400
    n, stop_at = 0, time.perf_counter() + duration_s
    t0 = time.perf_counter()
    while time.perf_counter() < stop_at:
        con.execute("BEGIN")
        con.execute("INSERT INTO t (body) VALUES (?)", (body,))
        con.execute("COMMIT")
        n += 1
    rate = n / (time.perf_counter() - t0)
    con.close()
    return rate


def table(rows: list[tuple]) -> None:
    print(f"{'figure':<52} {'value':>12} {'baseline':>12} {'ratio':>8}  target")
    for name, value, base, target in rows:
        ratio = value / base if base else float("nan")
        b = f"{base:12.1f}" if base else f"{'-':>12}"
        r = f"{ratio:8.2f}" if base else f"{'-':>8}"
        print(f"{name:<52} {value:12.1f} {b} {r}  {target}")


def median(values):
    return statistics.median(values)
