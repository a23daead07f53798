"""The socket as seed 001's "Wire format" says: framing, caps, limits, peers. A real worker each."""
import json
import os
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest

LIMITS = {"LONCA_LINE_MAX": "1024", "LONCA_BIG_LINE_MAX": "4096", "LONCA_IDLE_S": "1.5", "LONCA_LINE_S": "1.0",
          "LONCA_MAX_CONNS": "4", "LONCA_MAX_CONNS_PER_UID": "3"}


@pytest.fixture(params=["sqlite"])
def database_url(request):
    # The wire does not touch the store; one backend is enough here.
    return None


@pytest.fixture
def small(make_worker):
    return make_worker(LIMITS)


class Conn:
    """A raw connection: bytes out, one JSON answer per line back."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def at_eof(self) -> bool:
        return self.file.read(1) == b""


def connect(w) -> Conn:
    return Conn(w.socket)


def read_line(c: Conn) -> dict:
    line = c.file.readline()
    if not line:
        raise EOFError("the daemon closed the connection")
    return json.loads(line)


def send(s, obj) -> None:
    s.sendall((json.dumps(obj) + "\n").encode())


def test_socket_modes(worker):
    st = os.stat(worker.socket)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(worker.socket.parent).st_mode) == 0o700


def test_socket_path_resolution(make_worker, tmp_path):
    w = make_worker({"LONCA_SOCKET": str(tmp_path / "elsewhere" / "d.sock")})
    assert w.socket == tmp_path / "elsewhere" / "d.sock" and w.socket.exists()
    res = w.cli("doctor", "--json")
    assert json.loads(res.stdout)["checks"][1]["level"] == "pass"


def test_in_order_answers_and_invalid_lines(worker):
    s = connect(worker)
    s.sendall(b'{"id": 1, "method": "ping", "params": {}}\nnot json\n[1,2]\n{"id": 2, "method": "nope", "params": {}}\n'
              b'{"id": 3, "method": "ping", "params": []}\n{"method": "ping"}\n{"id": 4, "method": "ping"}\n')
    answers = [read_line(s) for _ in range(7)]
    assert answers[0]["id"] == 1 and answers[0]["ok"] and answers[0]["result"]["protocol"] == 1
    assert [a["error"]["code"] for a in answers[1:3]] == ["invalid", "invalid"] and answers[1]["id"] == 0
    assert answers[3] == {"id": 2, "ok": False, "error": answers[3]["error"]} and answers[3]["error"]["code"] == "unknown_method"
    assert answers[4]["id"] == 3 and answers[4]["error"]["code"] == "invalid"
    assert answers[5]["id"] == 0 and answers[5]["error"]["code"] == "invalid"
    assert answers[6]["id"] == 4 and answers[6]["ok"]


def test_unknown_method_whatever_the_token(worker):
    s = connect(worker)
    send(s, {"id": 9, "method": "lease.teleport", "token": "lonca_bogus", "params": {}})
    assert read_line(s)["error"]["code"] == "unknown_method"


def test_too_large_then_the_connection_goes_on(small):
    s = connect(small)
    big = {"id": 5, "method": "status", "repo": "demo", "params": {"x": "a" * 2000}}
    send(s, big)
    a = read_line(s)
    assert a["id"] == 5 and a["error"]["code"] == "too_large"
    send(s, {"id": 6, "method": "ping", "params": {}})
    assert read_line(s)["ok"]
    # a method of the long-line list may pass the small cap, up to the big one
    send(s, {"id": 7, "method": "tree", "repo": "demo", "params": {"commit": "0" * 40, "pad": "a" * 2000}})
    assert read_line(s)["error"]["code"] == "unauthenticated"
    send(s, {"id": 8, "method": "tree", "repo": "demo", "params": {"pad": "a" * 5000}})
    assert read_line(s)["error"]["code"] == "too_large"
    send(s, {"id": 10, "method": "ping", "params": {}})
    pong = read_line(s)["result"]
    assert pong["refused"]["too_large"] == 2


def test_idle_connection_closed(small):
    s = connect(small)
    time.sleep(2.2)
    last = read_line(s)
    assert last["id"] == 0 and last["error"]["code"] == "closed"
    assert s.at_eof()


def test_slow_line_times_out(small):
    s = connect(small)
    s.sendall(b'{"id": 1, "method": "pi')
    last = read_line(s)
    assert last["id"] == 0 and last["error"]["code"] == "timeout"
    assert s.at_eof()


def test_full_daemon_evicts_the_quietest(small):
    time.sleep(0.3)  # let the worker see the start-up probe's connection close
    conns = [connect(small) for _ in range(3)]
    for i, c in enumerate(conns):
        send(c, {"id": i + 1, "method": "ping", "params": {}})
        read_line(c)
        time.sleep(0.05)
    newest = connect(small)  # over 3 per uid: the quietest (the first) is closed
    send(newest, {"id": 1, "method": "ping", "params": {}})
    assert read_line(newest)["ok"]
    evicted = read_line(conns[0])
    assert evicted["id"] == 0 and evicted["error"]["code"] == "closed"
    send(conns[1], {"id": 9, "method": "ping", "params": {}})
    assert read_line(conns[1])["result"]["refused"]["evicted"] == 1


def test_other_uid_refused(worker):
    pid = os.fork()
    if pid == 0:  # the child becomes nobody and tries the socket
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(str(worker.socket))
                code = 2  # the socket mode should already stop nobody
            except PermissionError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_peer_uid_checked_when_the_socket_is_open(make_worker):
    """Even with the socket opened to everyone, a peer of another uid is refused (SO_PEERCRED)."""
    open_dir = Path(tempfile.mkdtemp(prefix="lonca-peer-"))
    os.chmod(open_dir, 0o755)
    w = make_worker({"LONCA_SOCKET": str(open_dir / "s" / "d.sock")})
    os.chmod(w.socket, 0o666)
    os.chmod(w.socket.parent, 0o755)
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(str(w.socket))
            s.sendall(b'{"id": 1, "method": "ping", "params": {}}\n')
            os.write(wfd, s.makefile("rb").readline())
        finally:
            os._exit(0)
    os.close(wfd)
    os.waitpid(pid, 0)
    answer = json.loads(os.read(r, 4096))
    assert answer["ok"] is False and answer["error"]["code"] == "forbidden"
