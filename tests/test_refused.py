"""`ping.refused` (seed 001, "ping"): each count goes up when its limit turns a request away, over
a real socket. too_large and evicted are counted in tests/test_wire.py beside their framing."""
import json
import socket
import threading
import time

import pytest

from helpers import RepoEnv

# small limits: three connections of one uid, long lines (over 2 KiB) held up to 6 KiB at once
BUSY = {"LONCA_LINE_MAX": "2048", "LONCA_BIG_LINE_MAX": "16384", "LONCA_BIG_LINES_BUDGET": "6000",
        "LONCA_MAX_CONNS": "8", "LONCA_MAX_CONNS_PER_UID": "3"}
QUICK = {"LONCA_IDLE_S": "1.0", "LONCA_LINE_S": "0.8"}


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None       # the counts are the worker's memory, not the store's


class Line:
    """A raw connection: JSON out, one JSON answer per line back."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def send(self, obj) -> None:
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def read(self) -> dict:
        line = self.file.readline()
        assert line, "the daemon closed the connection"
        return json.loads(line)

    def call(self, obj) -> dict:
        self.send(obj)
        return self.read()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def refused(worker) -> dict:
    c = Line(worker.socket)
    try:
        return c.call({"id": 1, "method": "ping", "params": {}})["result"]["refused"]
    finally:
        c.close()


def test_rate_limited_is_counted(repo_env, worker):
    """Past [sessions] ops_per_minute the session gets rate_limited, nothing is logged, and ping
    counts it."""
    env: RepoEnv = repo_env
    env.policy("[sessions]\nops_per_minute = 2\n")
    token = env.agent("a")["token"]
    assert refused(worker)["rate_limited"] == 0
    c = Line(worker.socket)
    negotiate = {"method": "negotiate", "token": token,
                 "params": {"thread": "t1", "to_session": "nobody", "message": {"type": "accept"}}}
    for i in (1, 2):
        assert c.call({"id": i, **negotiate})["ok"]          # logged (denied: unknown_session)
    entries = len(env.log())
    for i in (3, 4):
        answer = c.call({"id": i, **negotiate})
        assert answer["error"]["code"] == "rate_limited"
        assert "ops_per_minute (2)" in answer["error"]["message"]
    assert len(env.log()) == entries
    assert refused(worker)["rate_limited"] == 2
    c.close()


def test_every_agent_method_that_writes_spends_the_budget(repo_env, worker):
    """The seed exempts session.end, mcp.call and the methods that write nothing to the log: each
    other agent writer is refused once the budget is spent, before it reads its params."""
    from lonca.service import daemon  # noqa: F401  (loads every method module)
    from lonca.service.methods import METHODS
    from lonca.service.ratelimit import EXEMPT     # session.end, and mcp.call (seed: not counted)
    limited = sorted(n for n, m in METHODS.items()
                     if m.writes and m.credential == "agent" and n not in EXEMPT)
    assert {"lease.acquire", "session.heartbeat", "change.propose", "negotiate"} <= set(limited)
    env: RepoEnv = repo_env
    env.policy("[sessions]\nops_per_minute = 1\n")
    token = env.agent("a")["token"]
    c = Line(worker.socket)
    assert c.call({"id": 1, "method": "session.heartbeat", "token": token, "params": {}})["ok"]
    entries = len(env.log())
    for i, name in enumerate(limited, 2):
        answer = c.call({"id": i, "method": name, "token": token, "params": {}})
        assert answer["error"]["code"] == "rate_limited", (name, answer)
    assert c.call({"id": 99, "method": "whoami", "token": token, "params": {}})["ok"]
    assert len(env.log()) == entries
    assert refused(worker)["rate_limited"] == len(limited)
    assert c.call({"id": 100, "method": "session.end", "token": token, "params": {}})["ok"]
    c.close()


def test_busy_is_counted_for_a_full_daemon_and_for_long_lines(make_worker, source_repo,
                                                              monkeypatch):
    """Every connection of the uid answering a request: a new one gets busy and closes. A long line
    past the budget of long lines held: busy, and the connection goes on."""
    worker = make_worker(BUSY)
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    repo_env = RepoEnv(worker, source_repo)
    repo_env.client.close()               # three connections of our own, and no other
    time.sleep(0.3)
    waiting = [Line(worker.socket) for _ in range(3)]
    for c in waiting:
        c.send({"id": 1, "method": "log", "repo": "demo", "token": repo_env.token,
                "params": {"from": 10_000, "wait_ms": 2500}})
    time.sleep(0.5)
    extra = Line(worker.socket)
    answer = extra.read()
    assert answer["id"] == 0 and answer["error"]["code"] == "busy"
    extra.close()
    for c in waiting:
        assert c.read()["result"] == []
    c = waiting[0]
    # a long line held as it arrives: past the budget when its first 7 000 bytes are in
    big = json.dumps({"id": 2, "method": "tree", "repo": "demo", "params": {"pad": "a" * 10_000}})
    c.sock.sendall(big[:7000].encode())
    time.sleep(0.3)
    c.sock.sendall(big[7000:].encode() + b"\n")
    assert c.read()["error"]["code"] == "busy"
    assert c.call({"id": 3, "method": "ping", "params": {}})["result"]["refused"]["busy"] == 2
    for c in waiting:
        c.close()


def test_idle_and_slow_are_counted(make_worker):
    worker = make_worker(QUICK)
    quiet = Line(worker.socket)
    slow = Line(worker.socket)
    slow.sock.sendall(b'{"id": 1, "method": "pi')
    assert slow.read()["error"]["code"] == "timeout"
    assert quiet.read()["error"]["code"] == "closed"
    counts = refused(worker)
    assert (counts["slow"], counts["idle"]) == (1, 1)


def test_a_slow_reader_is_counted(make_worker):
    """An answer not read within the line limit: the connection closes, counted as slow."""
    worker = make_worker(QUICK)
    c = Line(worker.socket)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stop = threading.Event()

    def flood() -> None:    # requests whose answers nobody reads, until the worker gives up
        try:
            while not stop.is_set():
                c.sock.sendall(b'{"id": 1, "method": "ping", "params": {}}\n' * 200)
        except OSError:
            pass
    t = threading.Thread(target=flood, daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while refused(worker)["slow"] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    assert refused(worker)["slow"] >= 1
    c.close()
