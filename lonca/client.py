"""The socket client every Lonca client uses (CLI, MCP bridge, Lonis provider, console): it
verifies the daemon before sending anything (seed 001, "Verifying the daemon"), frames JSON lines,
and raises typed errors.

It sends a request again where the seed says nothing ran: after the `closed` eviction (id 0), or
a connection the daemon closed before reading the request, at once on one new connection; should
that be evicted too (many more clients than the daemon's cap, all connecting), and after `busy` on
a new connection or a full listen backlog (EAGAIN) or no listener yet (ECONNREFUSED) when
connecting, again with backoff for as long as the client's own timeout (at least RETRY_S). A
connection that ends after the daemon read the request is never resent: the daemon may have run it."""
import errno
import itertools
import json
import os
import random
import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

from lonca import install, paths
from lonca.protocol import PROTOCOL, LoncaError

RETRY_S = 2.0   # the least time a refusal the seed calls "send it again" is retried
STEP_MAX_S = 0.5  # the longest single wait: a long budget keeps trying, not sleeping seconds
CONNECT_AGAIN = (errno.EAGAIN, errno.ECONNREFUSED)  # a full listen backlog; a daemon not listening yet


class Unreachable(Exception):
    """The daemon cannot be reached, is not who it should be, or does not speak the protocol."""


def expected_uid() -> tuple[int, bool]:
    """(uid the daemon must run as, whether a daemon.toml named it); Unreachable when the file
    is there but not to be trusted (lonca/install.py)."""
    found = install.read()
    if found.problem:
        raise Unreachable(found.problem)
    if found.daemon_uid is None:
        return os.getuid(), False
    return found.daemon_uid, True


def verify_socket(path: Path, uid: int, from_file: bool) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Unreachable(f"no daemon socket at {path}; start one with `lonca daemon` (or `make run`)") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise Unreachable(f"{path} is not a socket (a link or a file); refusing it")
    if st.st_uid != uid:
        raise Unreachable(f"{path} belongs to uid {st.st_uid}, not the daemon's uid {uid}; refusing it")
    if from_file:
        dst = os.stat(path.parent)
        if dst.st_uid not in (uid, 0) or dst.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise Unreachable(f"{path.parent} is writable by others or belongs to someone else; refusing it")


def request_line(rid: int, method: str, params: dict | None, repo: str | None, token: str | None) -> bytes:
    """One request line; token and repo come before params, since the daemon decides a long
    line's fate from its first 64 KiB."""
    req = {"id": rid, "method": method}
    if token is not None:
        req["token"] = token
    if repo is not None:
        req["repo"] = repo
    req["params"] = params or {}
    return json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def parse_response(line: bytes) -> dict:
    try:
        resp = json.loads(line)
    except ValueError:
        raise Unreachable("the daemon answered something that is not the protocol") from None
    if not isinstance(resp, dict) or "ok" not in resp:
        raise Unreachable("the daemon answered something that is not the protocol")
    return resp


def result_of(resp: dict):
    """The result of a response, or its error raised as LoncaError."""
    if resp["ok"]:
        return resp["result"]
    err = resp.get("error") or {}
    raise LoncaError(err.get("code", "internal"), err.get("message", ""))


def nothing_ran(resp: dict) -> str | None:
    """"closed" or "busy" when the answer is the daemon saying it ran nothing of what this
    connection sent (id 0): the request may be sent again. None otherwise."""
    if resp.get("ok") is False and resp.get("id") == 0:
        code = (resp.get("error") or {}).get("code")
        if code in ("closed", "busy"):
            return code
    return None


def closed_before_reading(fresh: bool) -> dict:
    """The answer of a connection the daemon closed before it read the request (the send
    failed): nothing ran. On a new connection that is a refusal to wait out (busy); on one used
    before, the eviction whose `closed` line came too late to read."""
    code = "busy" if fresh else "closed"
    return {"id": 0, "ok": False, "error": {"code": code, "message": "the daemon closed the connection before reading the request"}}


def retry_budget(timeout: float | None) -> float:
    """How long a client retries what the seed says to send again: as long as it would wait for
    an answer (its timeout), at least RETRY_S. A fixed 2 s made agents of a loaded daemon fail
    with `busy` while their callers were still willing to wait (30 agents at a cap of 4)."""
    return RETRY_S if timeout is None else max(RETRY_S, timeout)


class Backoff:
    """Waits that double from 10 ms up to STEP_MAX_S, for as long as the budget from the first.
    Each wait is drawn between half and all of its step: clients refused together (a burst of
    agents meeting a full daemon) would otherwise come back together, each time."""

    def __init__(self, budget_s: float = RETRY_S):
        self.end, self.delay = time.monotonic() + budget_s, 0.01

    def next_delay(self) -> float | None:
        """The next wait in seconds, or None when the budget is spent."""
        left = self.end - time.monotonic()
        if left <= 0:
            return None
        delay, self.delay = min(self.delay * random.uniform(0.5, 1.0), left), min(self.delay * 2, STEP_MAX_S)
        return delay

    def wait(self) -> bool:
        """Sleep before the next try; False when the budget is spent."""
        delay = self.next_delay()
        if delay is None:
            return False
        time.sleep(delay)
        return True


def check_peer(sock: socket.socket, uid: int, path) -> None:
    """The process at the other end of the socket runs as `uid` (SO_PEERCRED), or Unreachable."""
    _pid, peer_uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if peer_uid != uid:
        raise Unreachable(f"the process behind {path} runs as uid {peer_uid}, not {uid}; refusing it")


class Client:
    def __init__(self, path: Path | None = None, timeout: float | None = 60.0):
        self.path = Path(path) if path else paths.socket_path()
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._answered = False  # whether this connection has carried an answer yet (see `fresh`)
        self._buf = bytearray()
        self._ids = itertools.count(1)

    def connect(self) -> "Client":
        uid, from_file = expected_uid()
        verify_socket(self.path, uid, from_file)
        backoff = Backoff(retry_budget(self.timeout))
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(str(self.path))
                break
            except OSError as e:
                s.close()
                if e.errno in CONNECT_AGAIN and backoff.wait():
                    continue
                raise Unreachable(f"cannot connect to {self.path}: {e.strerror or e}") from None
        try:
            check_peer(s, uid, self.path)
        except Unreachable:
            s.close()
            raise
        self._sock, self._answered = s, False
        return self

    def close(self) -> None:
        if self._sock:
            self._sock.close()
            self._sock = None
        self._buf.clear()

    def __enter__(self) -> "Client":
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, method: str, params: dict | None = None, *, repo: str | None = None, token: str | None = None) -> dict:
        """Send one request and return the raw response object; sent again where nothing ran."""
        line = request_line(next(self._ids), method, params, repo, token)
        backoff, resent = Backoff(retry_budget(self.timeout)), False
        while True:
            fresh = self.fresh()
            code = nothing_ran(resp := self._exchange(line))
            if code == "closed" and not resent:
                resent = True
                continue
            if (code == "closed" or (code == "busy" and fresh)) and backoff.wait():
                continue
            return resp

    def fresh(self) -> bool:
        """Whether the next request goes on a connection that has carried no answer: one opened
        by `with Client(...)` counts, so `busy` met by its first request is waited out too."""
        return self._sock is None or not self._answered

    def _exchange(self, line: bytes) -> dict:
        """One send and its answer on the current (or a new) connection."""
        fresh = self.fresh()
        if self._sock is None:
            self.connect()
        try:
            self._sock.sendall(line)
        except OSError:
            self.close()
            return closed_before_reading(fresh)
        try:
            resp = parse_response(self._read_line())
        except OSError as e:
            self.close()
            raise Unreachable(f"the daemon connection failed: {e}") from None
        if not resp["ok"] and resp.get("id") == 0:  # closed, busy, timeout: the daemon ends the connection
            self.close()
        else:
            self._answered = True
        return resp

    def call(self, method: str, params: dict | None = None, *, repo: str | None = None, token: str | None = None):
        return result_of(self.request(method, params, repo=repo, token=token))

    def _read_line(self) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise OSError("the daemon closed the connection")
            self._buf += chunk


def checked_ping(client: Client) -> dict:
    """ping, refusing a daemon of another protocol number."""
    pong = client.call("ping")
    if pong.get("protocol") != PROTOCOL:
        raise Unreachable(f"the daemon speaks protocol {pong.get('protocol')}, this client protocol {PROTOCOL}")
    return pong


def wait_until_answering(proc: subprocess.Popen, path: Path | None = None, timeout_s: float = 60) -> str | None:
    """Wait for the worker just started as `proc` to answer ping (at `path`, or where clients
    look): None once it does, else why not ("exited", or "silent" after `timeout_s`)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return "exited"
        try:
            with Client(path, timeout=5) as c:
                c.call("ping")
            return None
        except (Unreachable, LoncaError, OSError):
            time.sleep(0.05)
    return "silent"
