"""`lonca mcp` on the wire: Las's rules for a child, strict arguments, the inbox after each tool,
claim_mismatch, and the keep-alive that beats and renews while it serves."""
import json
import time

import pytest

from agents.mcp_pipe import McpPipe
from test_leases import APP


@pytest.fixture
def pipes():
    opened: list[McpPipe] = []

    def open_(worker, ws) -> McpPipe:
        opened.append(McpPipe(worker, ws))
        return opened[-1]
    yield open_
    for p in opened:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def token_of(ws) -> str:
    return json.loads((ws / ".lonca" / "session").read_text())["token"]


def status(worker) -> dict:
    return worker.cli_json("status")


def test_a_child_as_las_expects(repo, agent, pipes):
    ws, _ = agent()
    p = pipes(repo, ws)
    early = p.request("ping")
    assert early["error"]["code"] == -32600 and early["error"]["message"] == "not initialized"
    p.notify("notifications/initialized")  # a notification is never answered, before or after
    p.send_raw(b"{not json")
    assert p.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    init = p.initialize()["result"]
    assert init["protocolVersion"] == "2024-11-05" and init["capabilities"] == {"tools": {"listChanged": False}}
    assert p.initialize()["error"]["message"] == "already initialized"
    assert p.request("ping")["result"] == {}
    assert p.request("resources/list")["error"]["code"] == -32601
    assert p.request("tools/call", {"name": "rm_rf", "arguments": {}})["error"] == {"code": -32602, "message": "unknown tool"}
    assert p.request("tools/call", "not an object")["error"]["code"] == -32602
    assert len(p.request("tools/list")["result"]["tools"]) == 14
    stderr = p.close()
    assert p.proc.returncode == 0
    out = b"".join(p.stdout).decode()
    assert len(p.stdout) == 9 and all(json.loads(line)["jsonrpc"] == "2.0" for line in p.stdout)
    assert token_of(ws) not in out + stderr and "Traceback" not in out + stderr


def test_strict_arguments_for_changes_lenient_for_reads(repo, agent, pipes):
    ws, _ = agent()
    p = pipes(repo, ws)
    p.initialize()
    listed = {t["name"]: t["inputSchema"] for t in p.request("tools/list")["result"]["tools"]}
    got, _, failed = p.tool("lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                              "intent": "fees", "colour": "red"})
    assert failed and got["error"]["code"] == "invalid" and "colour" in got["error"]["message"]
    assert got["expected"] == listed["lease_acquire"]
    assert status(repo)["leases"] == []  # refused before it reached the daemon
    got, _, failed = p.tool("status", {"verbose": True})
    assert not failed and got["repo"] == "demo"
    assert got["expected"] == listed["status"] and "verbose" in got["warnings"][0]
    got, _, failed = p.tool("symbols", {})
    assert failed and got["error"]["code"] == "invalid" and "path" in got["error"]["message"]
    got, _, failed = p.tool("lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "own"}], "intent": "x"})
    assert failed and "kind" in got["error"]["message"]
    got, _, failed = p.tool("symbols", {"path": "nowhere.py"})
    assert failed and got["error"]["code"] == "not_found"
    p.close()


def test_claim_mismatch_and_the_inbox(repo, agent, pipes):
    (wa, sa), (wb, sb) = agent("alpha"), agent("beta")
    a, b = pipes(repo, wa), pipes(repo, wb)
    a.initialize()
    b.initialize()
    assert a.tool("lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}], "intent": "fees"})[0]["set"]
    (wa / "app.py").write_text(APP.replace("amount * 2", "amount * 3"))
    got, _, failed = a.tool("propose", {"intent": "fees", "claim": {"edits": ["app.py#Client.pay"]}})
    assert failed and got["status"] == "denied" and "claim_mismatch:edits" in got["decision"]["reasons"]
    assert got["claim_mismatch"] == [{"field": "edits", "claimed": ["app.py#Client.pay"], "facts": ["app.py#charge"]}]
    sent, news, _ = b.tool("negotiate", {"thread": "fees", "to_session": sa,
                                          "message": {"type": "counter", "note": "leave charge to me"}})
    assert sent["decision"]["outcome"] == "allow" and news == []
    _, news, _ = a.tool("status")
    assert len(news) == 1 and "leave charge to me" in news[0] and sb in news[0]
    _, news, _ = a.tool("status")
    assert news == []  # told once
    got, _, failed = a.tool("propose", {"intent": "fees"})
    assert not failed and got["status"] == "queued" and "claim_mismatch" not in got
    a.close()
    b.close()


def test_keepalive_beats_and_renews(repo, agent, pipes):
    ws, sid = agent("alpha")
    other, _ = agent("beta")
    p = pipes(repo, ws)
    p.initialize()
    held = p.tool("lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}], "intent": "fees",
                                    "ttl_ms": 1500})[0]
    loose = json.loads(repo.cli("lease", "acquire", "app.py#Client.pay", "--intent", "pay", "--ttl-ms", "1500",
                                "--json", cwd=other, check=True).stdout)
    time.sleep(4)  # past both TTLs: only the bridge's lease is still held
    st = status(repo)
    me = next(s for s in st["sessions"] if s["id"] == sid)
    assert me["last_seen_ms"] is not None and st["now_ms"] - me["last_seen_ms"] < 3000
    live = {lease["set"] for lease in st["leases"]}
    assert held["set"] in live and loose["set"] not in live
    assert p.tool("end")[0]["decision"]["outcome"] == "allow"
    for name in ("status", "lease_release"):  # every tool, once the session is over
        got, _, failed = p.tool(name, {"set": held["set"]} if name == "lease_release" else {})
        assert failed and got["error"]["code"] == "session_inactive"
    stderr = p.close()
    assert token_of(ws) not in stderr


def test_outside_a_workspace_it_does_not_serve(repo, tmp_path):
    res = repo.cli("mcp", cwd=tmp_path, input='{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n')
    assert res.returncode == 3 and res.stdout == "" and "not in a Lonca workspace" in res.stderr


def test_a_connection_closed_while_quiet_is_opened_again(make_worker, source_repo, tmp_path, pipes):
    w = make_worker({"LONCA_IDLE_S": "1"})
    w.cli_json("init", "demo", "--import", str(source_repo))
    ws = tmp_path / "ws"
    w.cli_json("session", "start", "--agent", "alpha", "--dir", str(ws))
    p = pipes(w, ws)
    p.initialize()
    assert not p.tool("status")[2]
    time.sleep(2.5)  # the daemon closes the quiet connection; the next call goes on a new one
    got, _, failed = p.tool("status")
    assert not failed and got["repo"] == "demo", got
    p.close()


def wait_integrated(p: McpPipe, change: str, timeout: float = 30) -> None:
    start, deadline = 1, time.time() + timeout
    while time.time() < deadline:
        ev = p.tool("events", {"from": start})[0]
        start = ev["next"]
        if any(e["kind"] == "integrated" and e["change"] == change for e in ev["events"]):
            return
        time.sleep(0.2)
    raise AssertionError(f"{change} never integrated")


def test_interest_renew_release_sync_withdraw(repo, agent, pipes):
    (wa, _), (wb, _) = agent("alpha"), agent("beta")
    a, b = pipes(repo, wa), pipes(repo, wb)
    a.initialize()
    b.initialize()
    charge = [{"symbol": "app.py#charge", "kind": "edit"}]
    held = a.tool("lease_acquire", {"items": charge, "intent": "fees"})[0]["set"]
    waiting = b.tool("lease_interest", {"items": charge, "intent": "I need charge next"})[0]
    assert waiting["decision"]["outcome"] == "allow"
    assert a.tool("lease_renew", {"set": held, "ttl_ms": 120_000})[0]["decision"]["outcome"] == "allow"
    assert a.tool("lease_release", {"set": held})[0]["decision"]["outcome"] == "allow"
    _, news, _ = b.tool("status")
    assert any("Reserved for you" in n and "app.py#charge" in n for n in news)

    base = json.loads((wb / ".lonca" / "workspace.json").read_text())["base"]
    a.tool("lease_acquire", {"items": [{"symbol": "lib/util.py#helper", "kind": "edit"}], "intent": "answer 43"})
    (wa / "lib" / "util.py").write_text("def helper():\n    return 43\n")
    wait_integrated(a, a.tool("propose", {"intent": "answer 43"})[0]["change"])
    synced, _, failed = b.tool("sync")
    assert not failed and synced["base_before"] == base != synced["base_after"] and synced["conflicts"] == []
    assert "return 43" in (wb / "lib" / "util.py").read_text()
    old = b.tool("symbols", {"path": "lib/util.py", "commit": base})[0]
    assert old["commit"] == base and [s["id"] for s in old["symbols"]] == ["lib/util.py#helper", "lib/util.py#<file>"]

    # a change of the policy file waits for a human, so it is still there to withdraw
    b.tool("lease_acquire", {"items": [{"symbol": "lonca.toml#leases", "kind": "edit"}], "intent": "slower beats"})
    (wb / "lonca.toml").write_text("[leases]\ntimeout_ms = 6000\n")
    pending = b.tool("propose", {"intent": "slower beats"})[0]
    assert pending["status"] == "pending", pending
    withdrawn, _, failed = b.tool("withdraw", {"change": pending["change"]})
    assert not failed and withdrawn["decision"]["outcome"] == "allow"
    change = next(c for c in b.tool("status")[0]["changes"] if c["change"] == pending["change"])
    assert change["status"]["status"] == "withdrawn"
    a.close()
    b.close()


def test_ids_as_json_rpc_says(repo, agent, pipes):
    """An answer carries the request's id whenever the line has one that is an id; `"id": null`
    only where JSON-RPC 2.0 says so (no usable id); notifications and stray responses get nothing."""
    ws, _ = agent()
    p = pipes(repo, ws)
    p.initialize()

    def raw(line: bytes) -> dict:
        p.send_raw(line)
        return p.recv()

    silent = [b'{"method": "ping"}', b'{"jsonrpc": "2.0", "method": 7}', b'{"jsonrpc": "2.0", "method": "x", "params": "\xff"}',
              b'{"jsonrpc": "2.0", "id": 4, "result": {}}', b'{"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "m"}}']
    for line in silent:
        p.send_raw(line)
    # a request whose bytes are not UTF-8, or hold a lone surrogate, still has a readable id
    assert raw(b'{"jsonrpc": "2.0", "id": 11, "method": "ping", "params": {"x": "\xff"}}')["error"]["code"] == -32700
    got = raw(b'{"jsonrpc": "2.0", "id": "s-12", "method": "tools/call", "params": {"name": "status", "arguments": {"\\ud800": 1}}}')
    assert got["id"] == "s-12" and got["error"]["code"] == -32700
    assert raw(b'{"jsonrpc": "1.0", "id": 13, "method": "ping"}') == \
        {"jsonrpc": "2.0", "id": 13, "error": {"code": -32600, "message": "invalid request"}}
    for bad_id in (b"null", b"true", b"1.5", b'{"a": 1}', b"[1]"):
        got = raw(b'{"jsonrpc": "2.0", "id": ' + bad_id + b', "method": "ping"}')
        assert got["id"] is None and got["error"]["code"] == -32600, bad_id
    for not_an_object in (b"[]", b'[{"jsonrpc": "2.0", "id": 14, "method": "ping"}]', b"5"):
        assert raw(not_an_object)["id"] is None
    assert raw(b"{not json") == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    assert p.request("ping")["result"] == {}  # the server went on, and answered nothing for the silent lines
    stderr = p.close()
    assert len(p.stdout) == 1 + 3 + 5 + 3 + 1 + 1
    assert "notification was ignored" in stderr and "response was ignored" in stderr and "Traceback" not in stderr
