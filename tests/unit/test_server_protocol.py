"""The socket server as an asyncio Protocol (issue 18, tenth pass), on a real SocketServer and a
real Unix socket: how many turns of the loop a request takes (each waits for the GIL behind the
worker's threads under load), answers in order whatever the handler waits for and however the
bytes arrive, the long-line budget, a peer that reads nothing, a refusal read before the close."""
import asyncio
import json
import socket
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings, strategies as st

from lonca.client import request_line
from lonca.service.config import Limits
from lonca.service.server import CLOSE_S, SocketServer


async def echo(peer, req: dict) -> dict:
    """Answers at once, or after the waits its params ask for: loop turns (sleep 0), a timer, a
    future another callback sets."""
    for wait in req["params"].get("waits", []):
        if wait == "turn":
            await asyncio.sleep(0)
        elif wait == "timer":
            await asyncio.sleep(0.001)
        else:
            fut = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(fut.set_result, None)
            await fut
    if req["method"] == "fail":
        raise RuntimeError("a handler that fails")
    return {"id": req["id"], "ok": True, "result": {"params": req["params"]}}


def serving(limits: Limits | None = None, handle=echo):
    """A decorator: the test coroutine gets a started server and its socket path."""
    def wrap(fn):
        def run(*args):
            async def main():
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "s.sock"
                    server = SocketServer(path, limits or Limits(), handle)
                    await server.start()
                    try:
                        await fn(server, path, *args)
                    finally:
                        await server.close()
            asyncio.run(main())
        return run
    return wrap


def connect(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    s.setblocking(False)
    return s


async def read_lines(s: socket.socket, n: int, timeout: float = 5) -> list[dict]:
    loop = asyncio.get_running_loop()
    buf = b""
    async with asyncio.timeout(timeout):
        while buf.count(b"\n") < n:
            chunk = await loop.sock_recv(s, 65536)
            if not chunk:
                break
            buf += chunk
    return [json.loads(x) for x in buf.splitlines()]


async def turns_to_answer(s: socket.socket, line: bytes) -> int:
    """Turns of the loop from sending `line` (before the next turn) to the turn that sees its
    answer readable, counted by a callback that runs once each turn."""
    loop = asyncio.get_running_loop()
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        loop.call_soon(tick)
    seen = loop.create_future()
    s.sendall(line)
    loop.add_reader(s.fileno(), lambda: seen.done() or seen.set_result(ticks))
    loop.call_soon(tick)
    try:
        return await seen
    finally:
        loop.remove_reader(s.fileno())


@serving()
async def test_a_request_takes_three_turns_on_a_new_connection_and_two_on_an_open_one(server, path):
    """Accept (with the bytes sent at connect), connection_made (the line framed and answered),
    the client's read: 3. asyncio's streams took 6 (the accept's task, connection_made, the
    `_serve` task, the reader's wake-up), and 3 on an open connection."""
    s = connect(path)
    assert await turns_to_answer(s, request_line(1, "ping", {}, None, None)) == 3
    assert [a["id"] for a in await read_lines(s, 1)] == [1]
    assert await turns_to_answer(s, request_line(2, "ping", {}, None, None)) == 2
    assert [a["id"] for a in await read_lines(s, 1)] == [2]
    s.close()


@serving()
async def test_a_handler_that_waits_costs_only_its_own_turns(server, path):
    """A handler that yields a turn, or waits for a future set in the next turn, is answered in
    that next turn: its task's first step is not a turn of its own (create_task's would be)."""
    s = connect(path)
    s.sendall(request_line(0, "ping", {}, None, None))
    await read_lines(s, 1)
    for i, wait in enumerate(["turn", "future"], 1):
        assert await turns_to_answer(s, request_line(i, "ping", {"waits": [wait]}, None, None)) == 3
        assert [a["id"] for a in await read_lines(s, 1)] == [i]
    s.close()


WAITS = st.lists(st.sampled_from(["turn", "timer", "future"]), max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.lists(WAITS, min_size=1, max_size=12), st.lists(st.integers(1, 60), min_size=1, max_size=20),
       st.booleans())
def test_pipelined_lines_are_answered_in_order_however_they_arrive_and_wait(waits, cuts, then_eof):
    """Lines pipelined on one connection, cut at arbitrary points (byte by byte among them),
    handlers that answer at once or after turns, timers and futures: every answer, in order; a
    peer that ends its side after the last line still gets them all."""
    @serving()
    async def run(server, path):
        lines = b"".join(request_line(i, "ping", {"waits": w}, None, None) for i, w in enumerate(waits))
        s = connect(path)
        loop = asyncio.get_running_loop()
        at, k = 0, 0
        while at < len(lines):
            step = cuts[k % len(cuts)]
            await loop.sock_sendall(s, lines[at:at + step])
            at, k = at + step, k + 1
            await asyncio.sleep(0)
        if then_eof:
            s.shutdown(socket.SHUT_WR)
        got = await read_lines(s, len(waits))
        assert [(a["id"], a["result"]["params"]["waits"]) for a in got] == list(enumerate(waits))
        if then_eof:
            assert await loop.sock_recv(s, 10) == b""  # closed after the last answer
        s.close()
    run()


@serving()
async def test_a_request_sent_byte_by_byte(server, path):
    s = connect(path)
    loop = asyncio.get_running_loop()
    for b in request_line(7, "ping", {"x": "é"}, None, None):
        await loop.sock_sendall(s, bytes([b]))
        await asyncio.sleep(0.001)
    assert await read_lines(s, 1) == [{"id": 7, "ok": True, "result": {"params": {"x": "é"}}}]
    s.close()


@serving()
async def test_a_failing_handler_closes_only_its_connection(server, path):
    bad, good = connect(path), connect(path)
    bad.sendall(request_line(1, "fail", {"waits": ["turn"]}, None, None))
    loop = asyncio.get_running_loop()
    assert await asyncio.wait_for(loop.sock_recv(bad, 100), 5) == b""
    good.sendall(request_line(2, "ping", {}, None, None))
    assert [a["id"] for a in await read_lines(good, 1)] == [2]
    bad.close()
    good.close()


@serving(Limits(line_max=1024, big_line_max=64 * 1024, big_lines_budget=20_000))
async def test_the_long_line_budget_counts_every_chunk_and_is_given_back(server, path):
    """Two long lines arriving in pieces: the second goes past the budget as its later pieces
    come (not only its first), is refused busy with its id, and the connection goes on; once the
    lines end, nothing is held."""
    loop = asyncio.get_running_loop()
    a, b = connect(path), connect(path)
    first = request_line(1, "tree", {"pad": "a" * 12_000}, "demo", None)
    second = request_line(2, "tree", {"pad": "b" * 12_000}, "demo", None)
    await loop.sock_sendall(a, first[:11_000])
    await loop.sock_sendall(b, second[:2_000])  # past line_max, within the budget so far
    await asyncio.sleep(0.05)
    assert server._big_held == 13_000
    await loop.sock_sendall(b, second[2_000:11_000])  # 11 000 + 11 000 > 20 000
    await asyncio.sleep(0.05)
    assert server._big_held == 11_000
    await loop.sock_sendall(a, first[11_000:])
    await loop.sock_sendall(b, second[11_000:] + request_line(3, "ping", {}, None, None))
    assert [a["id"] for a in await read_lines(a, 1)] == [1]
    got = await read_lines(b, 2)
    assert (got[0]["id"], got[0]["error"]["code"]) == (2, "busy") and got[1]["id"] == 3
    assert server._big_held == 0 and server.refused["busy"] == 1
    a.close()
    b.close()


@serving(Limits(line_s=0.5))
async def test_a_peer_that_reads_nothing_is_closed_as_slow(server, path):
    """Answers pile up past the transport's high-water mark: the next line waits for the peer
    to read, line_s at most, then the connection is dropped and counted slow."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(str(path))
    s.setblocking(False)
    pad = "x" * 2000
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    with_lines = b"".join(request_line(i, "ping", {"pad": pad}, None, None) for i in range(400))
    try:
        await asyncio.wait_for(loop.sock_sendall(s, with_lines), 5)
    except (ConnectionError, asyncio.TimeoutError):
        pass
    while server.refused["slow"] == 0 and time.monotonic() - started < 5:
        await asyncio.sleep(0.05)
    assert server.refused["slow"] == 1 and not server._conns
    s.close()


def test_close_does_not_wait_on_a_peer_that_reads_nothing(tmp_path):
    async def main():
        server = SocketServer(tmp_path / "s.sock", Limits(), echo)
        await server.start()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(str(tmp_path / "s.sock"))
        s.setblocking(False)
        quiet = connect(tmp_path / "s.sock")
        loop = asyncio.get_running_loop()
        big = b"".join(request_line(i, "ping", {"pad": "y" * 2000}, None, None) for i in range(100))
        await loop.sock_sendall(s, big)
        await asyncio.sleep(0.2)  # answers stuck in the transport's buffer
        started = time.monotonic()
        await server.close()
        took = time.monotonic() - started
        assert took < CLOSE_S + 0.5 and not server._open
        assert await asyncio.wait_for(loop.sock_recv(quiet, 10), 2) == b""  # every connection closed
        assert not (tmp_path / "s.sock").exists()
        s.close()
        quiet.close()
    asyncio.run(main())


@serving(Limits(max_conns=2, max_conns_per_uid=2))
async def test_busy_is_read_before_the_close(server, path):
    """A connection refused busy (every other one answering) reads why, then its end, even with
    its request sent at once."""
    loop = asyncio.get_running_loop()
    held = [connect(path) for _ in range(2)]
    for i, s in enumerate(held):
        s.sendall(request_line(i, "ping", {"waits": ["timer"] * 200}, None, None))
    await asyncio.sleep(0.01)
    extra = connect(path)
    extra.sendall(request_line(9, "ping", {}, None, None))
    got = await read_lines(extra, 1)
    assert (got[0]["id"], got[0]["error"]["code"]) == (0, "busy")
    assert await asyncio.wait_for(loop.sock_recv(extra, 10), 2) == b""
    for i, s in enumerate(held):
        assert [a["id"] for a in await read_lines(s, 1)] == [i]
        s.close()
    extra.close()
