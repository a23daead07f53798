"""Framing (seed 001, "Wire format") on the real SocketServer with a handler that only echoes: one
answer per line and in order however the bytes arrive, a line over the cap refused with its id
while the connection goes on, and what is not a request answered `invalid`."""
import asyncio
import json

from lonca.client import parse_response, request_line
from lonca.service.config import Limits
from lonca.service.server import SocketServer


async def echo(peer, req: dict) -> dict:
    return {"id": req["id"], "ok": True, "result": {"method": req["method"], "params": req.get("params")}}


def exchange(tmp_path, chunks: list[bytes], answers: int, limits: Limits | None = None) -> list[dict]:
    async def run() -> list[dict]:
        server = SocketServer(tmp_path / "s.sock", limits or Limits(line_max=1024), echo)
        await server.start()
        try:
            reader, writer = await asyncio.open_unix_connection(str(tmp_path / "s.sock"))
            for c in chunks:
                writer.write(c)
                await writer.drain()
                await asyncio.sleep(0)
            out = [json.loads(await asyncio.wait_for(reader.readline(), 5)) for _ in range(answers)]
            writer.close()
            return out
        finally:
            await server.close()
    return asyncio.run(run())


def test_pipelined_lines_split_anywhere_are_answered_in_order(tmp_path):
    lines = b"".join(request_line(i, "ping", {"n": i}, None, None) for i in range(1, 6))
    chunks = [lines[i:i + 7] for i in range(0, len(lines), 7)]  # cut mid-key, mid-line
    got = exchange(tmp_path, chunks, 5)
    assert [(a["id"], a["result"]["params"]["n"]) for a in got] == [(i, i) for i in range(1, 6)]


def test_a_line_over_the_cap_is_refused_with_its_id_and_the_connection_goes_on(tmp_path):
    big = request_line(7, "status", {"pad": "x" * 5000}, "demo", None)
    got = exchange(tmp_path, [big, request_line(8, "ping", None, None, None)], 2)
    assert got[0]["id"] == 7 and got[0]["error"]["code"] == "too_large"
    assert got[1] == {"id": 8, "ok": True, "result": {"method": "ping", "params": {}}}


def test_what_is_not_a_request_is_invalid(tmp_path):
    got = exchange(tmp_path, [b"not json\n", b'{"id": 3}\n', b'{"id": true, "method": "x"}\n'], 3)
    assert [a["error"]["code"] for a in got] == ["invalid"] * 3 and all(a["ok"] is False for a in got)


def test_the_client_puts_token_and_repo_before_params():
    line = request_line(1, "status", {"x": 1}, "demo", "tok")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.index(b'"token"') < line.index(b'"repo"') < line.index(b'"params"')
    assert parse_response(b'{"id":1,"ok":true,"result":{}}') == {"id": 1, "ok": True, "result": {}}
