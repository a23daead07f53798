"""The asyncio twin of `lonca.client.Client`, for the console: the same checks of the daemon before
anything is sent (seed 001, "Verifying the daemon"), one request at a time per connection, and the
same typed errors, and the same rules for sending again where nothing ran (`closed`, `busy`, a
full backlog; see `lonca.client`). A long poll (`log` with `wait_ms`) holds a socket, not a thread."""
import asyncio
import itertools
from pathlib import Path

from lonca import paths
from lonca.client import (CONNECT_AGAIN, Backoff, Unreachable, check_peer, closed_before_reading,
                          expected_uid, nothing_ran, parse_response, request_line, result_of, retry_budget,
                          verify_socket)
from lonca.protocol import BIG_LINE_MAX


class AsyncClient:
    def __init__(self, path: Path | None = None, timeout: float | None = 60.0):
        self.path = Path(path) if path else paths.socket_path()
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def connect(self) -> None:
        uid, from_file = expected_uid()
        verify_socket(self.path, uid, from_file)
        backoff = Backoff(retry_budget(self.timeout))
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(str(self.path), limit=BIG_LINE_MAX + 1024)
                break
            except OSError as e:
                delay = backoff.next_delay() if e.errno in CONNECT_AGAIN else None
                if delay is None:
                    raise Unreachable(f"cannot connect to {self.path}: {e.strerror or e}") from None
                await asyncio.sleep(delay)
        try:
            check_peer(writer.get_extra_info("socket"), uid, self.path)
        except Unreachable:
            writer.close()
            raise
        self._reader, self._writer = reader, writer

    def close(self) -> None:
        if self._writer:
            self._writer.close()
        self._reader = self._writer = None

    async def call(self, method: str, params: dict | None = None, *, repo: str | None = None,
                   token: str | None = None):
        line = request_line(next(self._ids), method, params, repo, token)
        async with self._lock:
            backoff, resent = Backoff(retry_budget(self.timeout)), False
            while True:
                fresh = self._writer is None
                code = nothing_ran(resp := await self._exchange(line))
                if code == "closed" and not resent:
                    resent = True
                    continue
                delay = backoff.next_delay() if code == "closed" or (code == "busy" and fresh) else None
                if delay is None:
                    return result_of(resp)
                await asyncio.sleep(delay)

    async def _exchange(self, line: bytes) -> dict:
        fresh = self._writer is None
        if fresh:
            await self.connect()
        try:
            self._writer.write(line)
            await self._writer.drain()
        except OSError:
            self.close()
            return closed_before_reading(fresh)
        try:
            line = await asyncio.wait_for(self._reader.readline(), self.timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            self.close()
            raise Unreachable(f"the daemon connection failed: {type(e).__name__}") from None
        except asyncio.CancelledError:
            self.close()  # the answer may still come: this connection can no longer be trusted in order
            raise
        if not line:
            self.close()
            raise Unreachable("the daemon closed the connection")
        resp = parse_response(line)
        if not resp["ok"] and resp.get("id") == 0:
            self.close()
        return resp


class ClientPool:
    """Connections shared by the requests of one process, whatever their token: the console's
    browser sessions, a runner's agents (seed 001: every request carries its own token and repo,
    and a connection belongs to no session). Each call takes a free connection, opened on first
    use, so the process holds at most `size` of them whatever the number of sessions: 1 000
    agents in one process stay far under the daemon's 512 connections of one uid. A long poll
    (`log` with wait_ms) holds its connection until it is answered: follow the log once for the
    process, on a connection of its own, as the console's live stream does."""

    def __init__(self, path: Path | None = None, size: int = 8):
        self._free: asyncio.Queue[AsyncClient] = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(AsyncClient(path))

    async def call(self, method: str, params: dict | None = None, *, repo: str | None = None, token: str | None = None):
        client = await self._free.get()
        try:
            return await client.call(method, params, repo=repo, token=token)
        finally:
            self._free.put_nowait(client)

    def close(self) -> None:
        while not self._free.empty():
            self._free.get_nowait().close()
