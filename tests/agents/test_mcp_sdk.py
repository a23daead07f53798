"""`lonca mcp` driven by the official MCP Python SDK over stdio, as an agent host would: initialize,
list the tools, take a lease, propose, follow events until the change integrates."""
import concurrent.futures
import json
import sys
import time

import anyio
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types

from test_leases import APP

TOOL_NAMES = {"status", "symbols", "preview", "lease_acquire", "lease_release", "lease_renew", "lease_interest",
              "propose", "withdraw", "sync", "events", "diff", "negotiate", "end"}


def server(worker, ws) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "lonca", "mcp"], cwd=str(ws), env=worker.env)


def body(result: types.CallToolResult) -> dict:
    return json.loads(result.content[0].text)


async def call(s: ClientSession, name: str, args: dict | None = None) -> dict:
    return body(await s.call_tool(name, args or {}))


def test_sdk_takes_a_lease_proposes_and_follows_it_to_trunk(repo, agent):
    ws, session = agent("alpha")

    async def run():
        async with stdio_client(server(repo, ws)) as (read, write), ClientSession(read, write) as s:
            with pytest.raises(MCPError):  # nothing before initialize
                await s.send_ping()
            init = await s.initialize()
            assert init.protocol_version == "2024-11-05" and init.server_info.name == "lonca"
            again = types.InitializeRequest(params=types.InitializeRequestParams(
                protocol_version="2024-11-05", capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="second", version="1")))
            with pytest.raises(MCPError):  # exactly once
                await s.send_request(again, types.InitializeResult)
            await s.send_ping()
            listed = await s.list_tools()
            assert {t.name for t in listed.tools} == TOOL_NAMES
            assert all(t.input_schema["additionalProperties"] is False for t in listed.tools)

            table = await call(s, "symbols", {"path": "app.py"})
            assert {"app.py#charge", "app.py#Client.pay", "app.py#<file>"} <= {x["id"] for x in table["symbols"]}
            got = await call(s, "lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                                  "intent": "triple the fee"})
            assert got["decision"]["outcome"] == "allow" and got["set"]
            (ws / "app.py").write_text(APP.replace("amount * 2", "amount * 3"))
            preview = await call(s, "preview")
            assert preview["facts"]["edits"] == ["app.py#charge"]
            assert [d["code"] for d in preview["leases"]] == ["held_by_you"]
            proposed = await call(s, "propose", {"intent": "triple the fee"})
            assert proposed["decision"]["outcome"] == "allow" and proposed["status"] == "queued", proposed
            change, start, deadline = proposed["change"], 1, time.time() + 30
            while time.time() < deadline:
                ev = await call(s, "events", {"from": start})
                start = ev["next"]
                if any(e["kind"] == "integrated" and e["change"] == change for e in ev["events"]):
                    break
                await anyio.sleep(0.2)
            else:
                raise AssertionError(f"{change} never integrated")
            diff = await call(s, "diff", {"change": change})
            assert "amount * 3" in diff["diff"]
            status = await call(s, "status")
            assert next(c for c in status["changes"] if c["change"] == change)["status"]["status"] == "integrated"
            assert (await call(s, "end"))["decision"]["outcome"] == "allow"
    # its own thread: a session-wide Playwright browser keeps an event loop in the main thread
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, run).result()
    assert "lonca_" not in (ws / "app.py").read_text()
