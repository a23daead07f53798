"""The socket client every Lonca client uses (CLI, MCP bridge, Lonis provider, console): it
verifies the daemon before sending anything (seed 001, "Verifying the daemon"), frames JSON lines,
and raises typed errors."""
import itertools
import json
import os
import socket
import stat
import struct
import subprocess
import time
import tomllib
from pathlib import Path

from lonca import paths
from lonca.protocol import PROTOCOL, LoncaError

DAEMON_TOML = Path("/etc/lonca/daemon.toml")


class Unreachable(Exception):
    """The daemon cannot be reached, is not who it should be, or does not speak the protocol."""


def expected_uid(config: Path = DAEMON_TOML) -> tuple[int, bool]:
    """(uid the daemon must run as, whether a daemon.toml named it)."""
    try:
        st = config.stat()
    except FileNotFoundError:
        return os.getuid(), False
    if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Unreachable(f"{config} is not root-owned or is writable by others; refusing to trust it")
    try:
        return int(tomllib.loads(config.read_text())["daemon_uid"]), True
    except (KeyError, ValueError, tomllib.TOMLDecodeError) as e:
        raise Unreachable(f"{config} names no daemon_uid ({e})") from None


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
        self._buf = bytearray()
        self._ids = itertools.count(1)

    def connect(self) -> "Client":
        uid, from_file = expected_uid()
        verify_socket(self.path, uid, from_file)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(str(self.path))
        except OSError as e:
            s.close()
            raise Unreachable(f"cannot connect to {self.path}: {e.strerror or e}") from None
        try:
            check_peer(s, uid, self.path)
        except Unreachable:
            s.close()
            raise
        self._sock = s
        return self

    def close(self) -> None:
        if self._sock:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "Client":
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, method: str, params: dict | None = None, *, repo: str | None = None, token: str | None = None) -> dict:
        """Send one request and return the raw response object."""
        if self._sock is None:
            self.connect()
        try:
            self._sock.sendall(request_line(next(self._ids), method, params, repo, token))
            line = self._read_line()
        except OSError as e:
            self.close()
            raise Unreachable(f"the daemon connection failed: {e}") from None
        return parse_response(line)

    def call(self, method: str, params: dict | None = None, *, repo: str | None = None, token: str | None = None):
        resp = self.request(method, params, repo=repo, token=token)
        if not resp["ok"] and resp.get("id") == 0 and (resp.get("error") or {}).get("code") in ("closed", "timeout"):
            self.close()
        return result_of(resp)

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
