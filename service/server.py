"""The socket server (seed 001, "Wire format"): framing, line caps, peer checks, and the limits on
connections and time. It knows nothing of methods: each request goes to `handle`, answered in order.
"""
import array
import asyncio
import errno
import fcntl
import grp
import json
import logging
import os
import re
import resource
import socket
import struct
import termios
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from lonca.protocol import BIG_METHODS, LoncaError

from . import wire_json
from .config import Limits

log = logging.getLogger("lonca.server")
BACKLOG = 4096  # the kernel caps it at net.core.somaxconn; a burst of connects waits, not fails
FD_RESERVE = 96  # descriptors kept for the database, git stores, checks' pipes and the log
ACCEPT_LOG_S = 10.0  # at most one line per this about accepts failing for want of descriptors
ACCEPT_EVICT = 8  # connections evicted per failed accept: asyncio tries again only a second later

METHOD_RE = re.compile(rb'"method"\s*:\s*"([^"\\]{1,64})"')
ID_RE = re.compile(rb'^\s*\{\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,128}")')
CHUNK = 256 * 1024
log = logging.getLogger("lonca.server")


@dataclass
class Peer:
    uid: int
    pid: int
    conn_id: int


@dataclass
class _Conn:
    peer: Peer
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    last_active: float = field(default_factory=time.monotonic)
    answering: bool = False
    closing: bool = False
    line_started: float | None = None  # when the first byte of the line being read came


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return uid, pid


def error_line(rid, code: str, message: str) -> bytes:
    return json.dumps({"id": rid, "ok": False, "error": {"code": code, "message": message}}).encode() + b"\n"


def _answers(path: Path) -> bool:
    """Whether a process listens on the socket at `path` (a full backlog counts: it is alive)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        return True
    finally:
        s.close()


def _guess_id(head: bytes):
    m = ID_RE.match(head)
    if not m:
        return 0
    try:
        rid = wire_json.loads(m.group(1))
    except wire_json.Refused:
        return 0
    return rid if wire_json.valid_id(rid) else 0


class _LineTooLong(Exception):
    def __init__(self, head: bytes, code: str, message: str):
        self.head, self.code, self.message = head, code, message


class SocketServer:
    """Serves JSON lines on a Unix socket; `handle(peer, request) -> response dict`."""

    def __init__(self, path: Path, limits: Limits, handle: Callable[[Peer, dict], Awaitable[dict]],
                 allowed_uids: frozenset[int] = frozenset(), group: str | None = None):
        self.path = path
        self.group = group  # members may open the socket; the uid check below still applies
        self.limits = limits
        self.handle = handle
        self.allowed_uids = allowed_uids | {os.getuid()}
        # what the limits of the socket turned away (ping.refused; rate_limited is the methods')
        self.refused = {k: 0 for k in ("busy", "evicted", "idle", "slow", "too_large")}
        self._conns: dict[int, _Conn] = {}      # in the order of their last activity (_touch)
        self._of_uid: Counter[int] = Counter()  # connections of each uid
        self._next_id = 0
        self._big_held = 0
        self._server: asyncio.base_events.Server | None = None
        self._inode: int | None = None  # of the socket file this server bound
        self._accept_failures = 0
        self._accept_logged = 0.0

    async def start(self) -> None:
        parent = self.path.parent
        if not parent.exists():
            # private when the worker makes it; a folder it did not make is never chmod-ed (the
            # socket itself is 0600 and peers are checked by uid)
            parent.mkdir(parents=True, mode=0o700)
            os.chmod(parent, 0o700)
        self._fit_to_descriptors()
        if self.path.is_socket() or self.path.is_symlink():
            if _answers(self.path):
                raise LoncaError("busy", f"another worker serves {self.path}; stop it first, or set LONCA_SOCKET "
                                         "to a path of this worker's own")
            self.path.unlink()  # a leftover of a worker that ended without closing it
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=CHUNK, backlog=BACKLOG)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        if self.group is not None:
            try:
                os.chown(self.path, -1, grp.getgrnam(self.group).gr_gid)
            except (KeyError, PermissionError) as e:
                raise LoncaError("invalid", f"LONCA_SOCKET_GROUP={self.group}: no such group, or the worker's user is "
                                            f"not in it ({e.__class__.__name__}); name a group of yours") from None
            os.chmod(self.path, 0o660)
        self._inode = self.path.stat().st_ino
        loop = asyncio.get_running_loop()
        self._default_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        self._watchdog = loop.create_task(self._watch())

    def _fit_to_descriptors(self) -> None:
        """The connection caps fit the descriptor limit (seed: "less when it has few file
        descriptors"), keeping FD_RESERVE for the rest of the worker. The soft limit is raised
        first as far as the hard one allows: 1 024, the usual soft default under a far higher hard
        limit, cut the caps to 928 connections for nothing (issue 18: 1 000 agents)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return
        want = self.limits.max_conns + FD_RESERVE
        if soft < want and (hard == resource.RLIM_INFINITY or soft < hard):
            soft = want if hard == resource.RLIM_INFINITY else min(want, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        room = max(8, soft - FD_RESERVE)
        if room < self.limits.max_conns:
            log.warning("%d file descriptors allow %d connections (not %d); raise `ulimit -n` for more",
                        soft, room, self.limits.max_conns)
            self.limits.max_conns = room
        self.limits.max_conns_per_uid = min(self.limits.max_conns_per_uid, self.limits.max_conns)

    def _loop_exception(self, loop, context: dict) -> None:
        """asyncio reports an accept that failed for want of descriptors with a traceback, once
        per attempt: the quietest connections are evicted instead, and one line is logged at most
        every ACCEPT_LOG_S."""
        e = context.get("exception")
        if (str(context.get("message", "")).startswith("socket.accept()") and isinstance(e, OSError)
                and e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)):
            self._accept_failures += 1
            for _ in range(ACCEPT_EVICT):
                self._evict_quietest()
            now = time.monotonic()
            if now - self._accept_logged >= ACCEPT_LOG_S:
                log.warning("accepting a connection failed %d times: %s; the quietest connections are evicted",
                            self._accept_failures, os.strerror(e.errno))
                self._accept_logged, self._accept_failures = now, 0
            return
        if self._default_handler:
            self._default_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    def _evict_quietest(self) -> None:
        quiet = [c for c in self._conns.values() if not c.answering and not c.closing]
        if quiet:
            self._close_with(min(quiet, key=lambda c: c.last_active), "closed",
                             "the daemon is out of file descriptors and this connection was the quietest; "
                             "open a new connection and send the request again")
            self.refused["evicted"] += 1

    async def close(self) -> None:
        if self._server:
            self._watchdog.cancel()
            self._server.close()
            for conn in list(self._conns.values()):
                conn.writer.close()
            await self._server.wait_closed()
        # only the socket this server bound: another worker's, bound over it since, is theirs
        try:
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
        except FileNotFoundError:
            pass

    # -- connection admission -------------------------------------------------------------

    def _admit(self, peer: Peer) -> str | None:
        """Make room for a new connection: evict the longest-quiet idle one, or refuse (busy).
        `_conns` is kept in the order of their last activity (_touch), so the quietest come
        first: sorting every connection at each accept was a quarter of the loop's time with
        1 000 agents past the per-uid cap (bench fleet)."""
        for of_uid, cap in ((True, self.limits.max_conns_per_uid), (False, self.limits.max_conns)):
            # counted after the eviction the uid's cap made, if any: the same connection counted
            # twice made one new connection evict two when both caps were full
            if (self._of_uid[peer.uid] if of_uid else len(self._conns)) < cap:
                continue
            victim = next((c for c in self._conns.values() if (c.peer.uid == peer.uid or not of_uid)
                           and not c.answering and not c.closing and not self._sending(c)), None)
            if victim is None:
                return "busy"
            self._close_with(victim, "closed", "the daemon is full and this connection was the quietest; "
                                               "open a new connection and send the request again")
            self.refused["evicted"] += 1
        return None

    def _drop(self, conn: _Conn) -> None:
        if self._conns.pop(conn.peer.conn_id, None) is not None:
            self._of_uid[conn.peer.uid] -= 1

    def _touch(self, conn: _Conn) -> None:
        """`conn` was active now: last in `_conns`, which is kept in the order of activity."""
        conn.last_active = time.monotonic()
        if self._conns.pop(conn.peer.conn_id, None) is not None:
            self._conns[conn.peer.conn_id] = conn

    @staticmethod
    def _sending(conn: _Conn) -> bool:
        """Whether the peer has sent (part of) a request the daemon has not read yet: such a
        connection is not quiet, it is about to be answered. A burst of new connections, each
        sending at once, evicted each other with their requests unread, over and over, until
        their clients gave up (issue 18: 30 agents at a cap of 4). The bytes may be in the
        stream's buffer (fed, its task not yet run: asyncio has no public way to ask) or still in
        the kernel's (the transport not yet polled, as for connections accepted in one batch)."""
        if conn.line_started is not None or conn.reader._buffer:
            return True
        sock = conn.writer.get_extra_info("socket")
        waiting = array.array("i", [0])
        try:
            fcntl.ioctl(sock.fileno(), termios.FIONREAD, waiting)
        except OSError:
            return False
        return waiting[0] > 0

    def _close_with(self, conn: _Conn, code: str, message: str) -> None:
        conn.closing = True
        self._drop(conn)
        try:
            conn.writer.write(error_line(0, code, message))
        except (ConnectionError, RuntimeError):
            pass
        conn.writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid, pid = peer_credentials(sock)
        self._next_id += 1
        peer = Peer(uid=uid, pid=pid, conn_id=self._next_id)
        if uid not in self.allowed_uids:
            await self._refuse(reader, writer, "forbidden", "this daemon serves another user; run your own daemon")
            return
        refusal = self._admit(peer)
        if refusal:
            self.refused["busy"] += 1
            await self._refuse(reader, writer, "busy", "every connection is answering or sending a request; send it again")
            return
        conn = _Conn(peer=peer, reader=reader, writer=writer)
        self._conns[peer.conn_id] = conn
        self._of_uid[uid] += 1
        try:
            await self._loop(conn, reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing; ending quietly keeps asyncio from logging each connection
        finally:
            self._drop(conn)
            if not writer.is_closing():
                writer.close()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, code: str, message: str) -> None:
        """Answer and close without losing the answer: closing with the peer's request unread
        would reset the connection before the peer reads why."""
        writer.write(error_line(0, code, message))
        try:
            await asyncio.wait_for(writer.drain(), 5)
            writer.write_eof()
            await asyncio.wait_for(reader.read(self.limits.line_max), 1.0)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        writer.close()

    # -- reading lines ----------------------------------------------------------------------

    async def _loop(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        while not conn.closing:
            try:
                line = await self._read_line(conn, reader, buf)
            except _LineTooLong as e:
                self.refused["busy" if e.code == "busy" else "too_large"] += 1
                await self._send(conn, error_line(_guess_id(e.head), e.code, e.message))
                continue
            if line is None:
                return
            conn.answering = True
            try:
                response = await self._answer(conn.peer, line)
                await self._send(conn, response)
            finally:
                conn.answering = False
                self._touch(conn)

    async def _read_line(self, conn: _Conn, reader: asyncio.StreamReader, buf: bytearray) -> bytes | None:
        """The next whole line (without its newline), None at EOF or a close for time."""
        lim = self.limits
        conn.line_started = time.monotonic() if buf else None
        cap = lim.line_max
        held = 0  # bytes of a long line counted against the daemon-wide budget
        skipping: _LineTooLong | None = None
        head = bytes(buf[: lim.line_max])
        try:
            while True:
                nl = buf.find(b"\n")
                if nl >= 0:
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    if skipping:
                        raise skipping
                    if nl > lim.line_max and nl > self._cap_for(line[: lim.line_max]):
                        raise _LineTooLong(line[: lim.line_max], "too_large", f"a request line of this method may be at most {self._cap_for(line[: lim.line_max])} bytes")
                    return line
                if skipping is not None:
                    buf.clear()
                elif len(buf) > cap:
                    if cap == lim.line_max:
                        head = bytes(buf[: lim.line_max])
                        cap = self._cap_for(head)
                    if len(buf) > cap:
                        skipping = _LineTooLong(head, "too_large", f"a request line of this method may be at most {cap} bytes")
                        buf.clear()
                        continue
                    if self._big_held - held + len(buf) > lim.big_lines_budget:
                        skipping = _LineTooLong(head, "busy", "too many long lines are held right now; send it again")
                        buf.clear()
                        continue
                    self._big_held += len(buf) - held
                    held = len(buf)
                chunk = await reader.read(CHUNK)
                if not chunk or conn.closing:
                    return None
                if conn.line_started is None:
                    conn.line_started = time.monotonic()
                self._touch(conn)
                buf += chunk
        finally:
            self._big_held -= held

    def _cap_for(self, head: bytes) -> int:
        """The line cap of a request, from its first LINE_MAX bytes."""
        m = METHOD_RE.search(head)
        return self.limits.big_line_max if m and m.group(1).decode() in BIG_METHODS else self.limits.line_max

    async def _watch(self) -> None:
        """Close connections quiet past idle_s, or whose line takes longer than line_s. One
        periodic scan instead of a timer per read keeps the hot path free of timeouts."""
        lim = self.limits
        tick = max(0.05, min(1.0, lim.idle_s / 5, lim.line_s / 5))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for conn in list(self._conns.values()):
                if conn.answering or conn.closing:
                    continue
                if conn.line_started is not None and now - conn.line_started > lim.line_s:
                    self.refused["slow"] += 1
                    self._close_with(conn, "timeout", "the request line took too long to arrive; the connection closes")
                elif conn.line_started is None and now - conn.last_active > lim.idle_s:
                    self.refused["idle"] += 1
                    self._close_with(conn, "closed", "the connection was quiet too long and is closed; "
                                                     "open a new connection and send the request again")

    async def _answer(self, peer: Peer, line: bytes) -> bytes:
        try:
            req = wire_json.decode_request(line)
        except wire_json.Refused as e:
            return error_line(e.rid, "invalid", e.message)
        response = await self.handle(peer, req)
        try:
            return wire_json.dumps(response)
        except (TypeError, ValueError):
            log.exception("the answer to %s could not be encoded", req["method"])
            return error_line(req["id"], "internal", "the daemon failed to encode its answer; see its log")

    async def _send(self, conn: _Conn, data: bytes) -> None:
        conn.writer.write(data)
        if not conn.writer.transport.get_write_buffer_size():
            return
        try:
            await asyncio.wait_for(conn.writer.drain(), self.limits.line_s)
        except asyncio.TimeoutError:
            self.refused["slow"] += 1
            conn.closing = True
            conn.writer.close()
