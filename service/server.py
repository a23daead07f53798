"""The socket server (seed 001, "Wire format"): framing, line caps, peer checks, and the limits on
connections and time. It knows nothing of methods: each request goes to `handle`, answered in order.

An asyncio Protocol, not asyncio's streams: a line is framed in `data_received` and its handling
started in that same turn of the loop (service/eager.py), the answer written straight to the
transport. Streams took two more turns from a new connection to its line (the `_serve` task, the
reader's wake-up) and one more a request on an open one; under load each turn waits for the GIL
behind the worker's threads (docs/decisions.md, "A Protocol server: fewer loop turns a request").
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
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from lonca.protocol import BIG_METHODS, LoncaError

from . import eager, wire_json
from .config import Limits

log = logging.getLogger("lonca.server")
BACKLOG = 4096  # the kernel caps it at net.core.somaxconn; a burst of connects waits, not fails
FD_RESERVE = 96  # descriptors kept for the database, git stores, checks' pipes and the log
ACCEPT_LOG_S = 10.0  # at most one line per this about accepts failing for want of descriptors
ACCEPT_EVICT = 8  # connections evicted per failed accept, which is tried again only ACCEPT_RETRY_S later
ACCEPT_RETRY_S = 1.0  # as asyncio's own accept waits
REFUSE_S = 1.0  # a refused connection is closed after the peer's first bytes, or this long
CLOSE_S = 1.0  # close() waits this long for answers to flush, then drops what a peer has not read

METHOD_RE = re.compile(rb'"method"\s*:\s*"([^"\\]{1,64})"')
ID_RE = re.compile(rb'^\s*\{\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,128}")')
CHUNK = 256 * 1024  # read while a request is answered before reading pauses (as streams' limit did)


@dataclass
class Peer:
    uid: int
    pid: int
    conn_id: int


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


@dataclass
class _LineTooLong:
    """A line refused for its length (too_large) or for the daemon's long-line budget (busy)."""
    head: bytes  # its first line_max bytes, for the id of the error line
    code: str
    message: str


class _Conn(asyncio.Protocol):
    """One connection: its bytes framed into lines as they arrive, one line handled at a time and
    answered in order. While a line is answered, what arrives is kept (reading pauses past CHUNK)
    and framed once the answer is out; an answer the peer does not read past the transport's
    high-water mark holds the next line back for at most line_s, then the connection closes."""

    def __init__(self, server: "SocketServer", early: bytes = b""):
        self.server = server
        self.early = early  # read with the accept, before the transport was made
        self.transport: asyncio.Transport | None = None
        self.peer: Peer | None = None
        self.last_active = time.monotonic()
        self.answering = False  # a line is being handled, or its answer waits for the peer to read
        self.closing = False
        self.refusing = False  # refused at connect: only the error line goes out
        self.line_started: float | None = None  # when the first byte of the line being read came
        self.buf = bytearray()
        self.scanned = 0  # bytes of buf known to hold no newline
        self.cap = server.limits.line_max  # of the line being read, from its head once past line_max
        self.head = b""
        self.held = 0  # bytes of a long line counted against the daemon-wide budget
        self.skipping: _LineTooLong | None = None  # the rest of a refused line is dropped up to its newline
        self.eof = False
        self.framing = False
        self.read_paused = False
        self.write_paused = False
        self.timer: asyncio.TimerHandle | None = None  # a refusal's close, or a slow reader's
        self.task: asyncio.Task | None = None  # the rest of a handle that waited

    # -- asyncio's calls ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server._connected(self)
        if self.early:
            data, self.early = self.early, b""
            self.data_received(data)

    def data_received(self, data: bytes) -> None:
        if self.refusing:  # the peer's request is in: the error line went before it
            self.transport.close()
            return
        if self.closing:
            return
        if self.line_started is None and not self.answering:
            self.line_started = time.monotonic()
        self.server._touch(self)
        self.buf += data
        if not self.answering:
            self._frame()
        elif len(self.buf) > CHUNK and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        if self.answering and not self.closing:
            return True  # the answer still goes out; the connection closes after it
        self._close()
        return False

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.timer is not None and not self.refusing:
            self.timer.cancel()
            self.timer = None
            self._answered()

    def connection_lost(self, exc) -> None:
        self.closing = True
        self._release()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.server._lost(self)

    # -- lines --------------------------------------------------------------------------------

    def _frame(self) -> None:
        """Handle the whole lines in buf, one at a time, as long as each is answered at once."""
        if self.framing:  # an answer given while this runs: the loop below goes on
            return
        self.framing = True
        try:
            while not self.answering and not self.closing:
                got = self._next_line()
                if got is None:
                    break
                self.answering = True
                self.line_started = None
                if isinstance(got, _LineTooLong):
                    self.server.refused["busy" if got.code == "busy" else "too_large"] += 1
                    self._reply(error_line(_guess_id(got.head), got.code, got.message))
                else:
                    self.task = eager.start(self.server.loop, self._serve_line(got))
        finally:
            self.framing = False
        if self.answering or self.closing:
            return
        if self.eof:  # what is left is a line without its end
            self._close()
        elif self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def _next_line(self) -> bytes | _LineTooLong | None:
        """The next whole line of buf (without its newline) or its refusal; None until one is in.
        A line past line_max is held only up to the cap of its method (`_cap_for` its head) and
        within the daemon-wide budget for long lines; past either, the rest of it is dropped as
        it comes and its refusal is the answer when its newline comes."""
        lim, buf = self.server.limits, self.buf
        nl = buf.find(b"\n", self.scanned)
        if nl >= 0:
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            self.scanned = 0
            skipped = self.skipping
            self._line_ended()
            if skipped is not None:
                return skipped
            if nl > lim.line_max:
                cap = self.server._cap_for(line[: lim.line_max])
                if nl > cap:
                    return _LineTooLong(line[: lim.line_max], "too_large", f"a request line of this method may be at most {cap} bytes")
            return line
        if self.skipping is not None:
            buf.clear()
            self.scanned = 0
        elif len(buf) > lim.line_max:
            if not self.head:
                self.head = bytes(buf[: lim.line_max])
                self.cap = self.server._cap_for(self.head)
            if len(buf) > self.cap:
                self._skip(_LineTooLong(self.head, "too_large", f"a request line of this method may be at most {self.cap} bytes"))
            elif self.server._big_held - self.held + len(buf) > lim.big_lines_budget:
                self._skip(_LineTooLong(self.head, "busy", "too many long lines are held right now; send it again"))
            else:
                self.server._big_held += len(buf) - self.held
                self.held = len(buf)
                self.scanned = len(buf)
        else:
            self.scanned = len(buf)
        return None

    def _skip(self, refusal: _LineTooLong) -> None:
        self.skipping = refusal
        self.buf.clear()
        self.scanned = 0
        self._release()

    def _line_ended(self) -> None:
        self._release()
        self.cap, self.head, self.skipping = self.server.limits.line_max, b"", None

    def _release(self) -> None:
        self.server._big_held -= self.held
        self.held = 0

    # -- answers ------------------------------------------------------------------------------

    async def _serve_line(self, line: bytes) -> None:
        try:
            answer = await self.server._answer(self.peer, line)
        except Exception:  # handle answers its own failures; this one closes the connection
            log.exception("answering a request failed")
            self.task = None
            self._close()
            return
        self._reply(answer)

    def _reply(self, data: bytes) -> None:
        """Write an answer; past the high-water mark, the next line waits for the peer to read it."""
        self.task = None
        if self.closing:
            return
        self.transport.write(data)
        if self.write_paused:
            self.timer = self.server.loop.call_later(self.server.limits.line_s, self._slow)
            return
        self._answered()

    def _answered(self) -> None:
        self.answering = False
        self.server._touch(self)
        self.line_started = time.monotonic() if self.buf else None
        self._frame()

    def _slow(self) -> None:
        """The peer read none of its answers for line_s: dropped, with what it has not read."""
        self.timer = None
        self.server.refused["slow"] += 1
        self.closing = True
        self.server._drop(self)
        self.transport.abort()

    def _close(self) -> None:
        self.closing = True
        self.server._drop(self)
        self.transport.close()

    def refuse(self, code: str, message: str) -> None:
        """Answer and close without losing the answer: closing with the peer's request unread
        would reset the connection before the peer reads why. Closed once the peer's bytes
        come, at its end, or after REFUSE_S."""
        self.refusing = self.closing = True
        self.transport.write(error_line(0, code, message))
        self.transport.write_eof()
        self.timer = self.server.loop.call_later(REFUSE_S, self.transport.close)


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
        self._conns: dict[int, _Conn] = {}      # admitted, in the order of their last activity (_touch)
        self._open: set[_Conn] = set()          # every connection not yet lost, refused ones too
        self._all_lost: asyncio.Future | None = None  # close() waits on it
        self.loop: asyncio.AbstractEventLoop | None = None
        self._of_uid: Counter[int] = Counter()  # connections of each uid
        self._next_id = 0
        self._big_held = 0
        self._listener: socket.socket | None = None
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
        self.loop = asyncio.get_running_loop()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        except BaseException:
            listener.close()
            raise
        finally:
            os.umask(old)
        listener.listen(BACKLOG)
        listener.setblocking(False)
        self._listener = listener
        self._listen()
        os.chmod(self.path, 0o600)
        if self.group is not None:
            try:
                os.chown(self.path, -1, grp.getgrnam(self.group).gr_gid)
            except (KeyError, PermissionError) as e:
                raise LoncaError("invalid", f"LONCA_SOCKET_GROUP={self.group}: no such group, or the worker's user is "
                                            f"not in it ({e.__class__.__name__}); name a group of yours") from None
            os.chmod(self.path, 0o660)
        self._inode = self.path.stat().st_ino
        self._watchdog = self.loop.create_task(self._watch())

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

    def _listen(self) -> None:
        if self._listener is not None:
            self.loop.add_reader(self._listener.fileno(), self._accept)

    def _accept(self) -> None:
        """Every connection waiting, in this turn of the loop (asyncio's own accept takes a turn
        more, a task per connection that makes its transport). The bytes a peer sent with its
        connect are read here too: its line is framed in the next turn, with connection_made,
        and not one turn after that when the transport's first read would get it."""
        for _ in range(BACKLOG):
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accepting a connection failed: %s", e)
                    return
                self._out_of_descriptors(e.errno)
                return
            try:
                early = sock.recv(CHUNK, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                early = b""
            except OSError:  # gone already
                sock.close()
                continue
            # connect_accepted_socket's first step makes the transport (connection_made is called
            # soon); its task only waits for that, the connection is the protocol's from then on
            try:
                eager.start(self.loop, self.loop.connect_accepted_socket(lambda: _Conn(self, early), sock))
            except OSError:
                sock.close()

    def _out_of_descriptors(self, code: int) -> None:
        """An accept failed for want of descriptors: the quietest connections are evicted, one
        line is logged at most every ACCEPT_LOG_S, and accepting resumes ACCEPT_RETRY_S later
        (the listening socket stays readable meanwhile: polling it would spin)."""
        self._accept_failures += 1
        for _ in range(ACCEPT_EVICT):
            self._evict_quietest()
        now = time.monotonic()
        if now - self._accept_logged >= ACCEPT_LOG_S:
            log.warning("accepting a connection failed %d times: %s; the quietest connections are evicted",
                        self._accept_failures, os.strerror(code))
            self._accept_logged, self._accept_failures = now, 0
        self.loop.remove_reader(self._listener.fileno())
        self.loop.call_later(ACCEPT_RETRY_S, self._listen)

    def _evict_quietest(self) -> None:
        quiet = [c for c in self._conns.values() if not c.answering and not c.closing]
        if quiet:
            self._close_with(min(quiet, key=lambda c: c.last_active), "closed",
                             "the daemon is out of file descriptors and this connection was the quietest; "
                             "open a new connection and send the request again")
            self.refused["evicted"] += 1

    async def close(self) -> None:
        """Stop listening and close every connection: answers still unread by their peers get
        CLOSE_S to flush, then they are dropped (a peer that never reads does not hold it)."""
        if self._listener is not None:
            self._watchdog.cancel()
            self.loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
            for conn in list(self._open):
                conn._close()
            if self._open:
                self._all_lost = self.loop.create_future()
                await asyncio.wait([self._all_lost], timeout=CLOSE_S)
                for conn in list(self._open):
                    conn.transport.abort()
                await asyncio.sleep(0)  # their connection_lost, called soon by abort
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

    def _connected(self, conn: _Conn) -> None:
        """A new connection, in the turn its transport is made: its peer checked and admitted,
        or refused with why."""
        if self._listener is None:  # accepted just before close()
            conn._close()
            return
        uid, pid = peer_credentials(conn.transport.get_extra_info("socket"))
        self._next_id += 1
        conn.peer = Peer(uid=uid, pid=pid, conn_id=self._next_id)
        self._open.add(conn)
        if uid not in self.allowed_uids:
            conn.refuse("forbidden", "this daemon serves another user; run your own daemon")
            return
        if self._admit(conn.peer):
            self.refused["busy"] += 1
            conn.refuse("busy", "every connection is answering or sending a request; send it again")
            return
        self._conns[conn.peer.conn_id] = conn
        self._of_uid[uid] += 1

    def _lost(self, conn: _Conn) -> None:
        self._drop(conn)
        self._open.discard(conn)
        if not self._open and self._all_lost is not None and not self._all_lost.done():
            self._all_lost.set_result(None)

    def _drop(self, conn: _Conn) -> None:
        if conn.peer is not None and self._conns.pop(conn.peer.conn_id, None) is conn:
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
        connection's buffer or still in the kernel's (the transport not yet polled, as for
        connections accepted in one batch, or reading paused)."""
        if conn.line_started is not None or conn.buf:
            return True
        sock = conn.transport.get_extra_info("socket")
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
            conn.transport.write(error_line(0, code, message))
        except (ConnectionError, RuntimeError):
            pass
        conn.transport.close()

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
