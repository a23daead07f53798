"""Lonca as a Lonis provider: manifest, tools list/describe, call in json and ndjson, ToolErrors
with Lonis's exit codes. Every block emitted validates against the published schemas, and the
published golden hashes reproduce with Lonca's canonical hashing."""
import json
import subprocess
import sys

from lonca import canonical
from lonca.lonis_blocks import EXIT_CODES, json_content_hash, payload_hash
from lonca.mcp_tools import TOOLS

from .conftest import contracts

READS = {"status", "symbols", "preview", "events", "diff"}


def lonis(worker, *args, stdin: str = "", cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lonca", *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd or worker.tmp, env=env or worker.env, timeout=120)


def call(worker, blocks, tool: str, args, cwd, mode: str = "json") -> list[dict]:
    res = lonis(worker, "--mode", mode, "call", tool, stdin=json.dumps(args), cwd=cwd)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    out = json.loads(res.stdout) if mode == "json" else [json.loads(line) for line in res.stdout.splitlines()]
    for blk in out:
        blocks.check(blk)
    return out


def tool_error(res: subprocess.CompletedProcess, kind: str) -> dict:
    err = json.loads(res.stderr)
    assert res.returncode == EXIT_CODES[kind] == err["exit_code"] and err["kind"] == kind and res.stdout == "", res
    return err


def test_golden_blocks_validate_and_their_hashes_reproduce(blocks):
    root = contracts()
    pinned = json.loads((root / "golden" / "hashes.json").read_text())
    golden = {p.stem: json.loads(p.read_text()) for p in (root / "golden").glob("*.json") if p.stem != "hashes"}
    assert set(pinned) <= set(golden)
    for name, blk in golden.items():
        blocks.check(blk)
    assert {name: payload_hash(golden[name]) for name in pinned} == pinned
    # Lonca's own payloads carry no fractional number: there the hash is canonical.content_hash itself
    plain = golden["capability"]["payload"]
    assert json_content_hash(plain) == canonical.content_hash(plain)
    assert json_content_hash({"n": 100.0, "z": -0.0}) == canonical.content_hash({"n": 100, "z": 0})


def test_manifest_list_and_contracts(worker):
    manifest = json.loads(lonis(worker, "--mode", "json", "manifest").stdout)
    assert manifest["name"] == "lonca" and manifest["schema_version"] == "lonis.block/v1"
    listed = json.loads(lonis(worker, "--mode", "json", "tools", "list").stdout)
    assert listed["provider"] == "lonca" and listed["tools"] == manifest["tools"]
    ids = [t["name"] for t in listed["tools"]]
    assert len(ids) == len(set(ids)) == 14 and all(i.count(":") == 2 and i.startswith("lonca:") for i in ids)
    for t in TOOLS:
        c = json.loads(lonis(worker, "--mode", "json", "tools", "describe", t.tool_id).stdout)
        assert c["name"] == t.tool_id and c["input_schema"] == t.schema
        assert (c["side_effects"] == "read-only") == (t.name in READS), t.name
        assert c["determinism"] == "nondeterministic"  # they all read the live repository
        assert c["cost"] in ("low", "medium", "high")
    tool_error(lonis(worker, "--mode", "json", "tools", "describe", "lonca:lease:steal"), "not_found")


def test_call_blocks_attributed_to_the_session(repo, agent, blocks):
    ws, sid = agent("alpha")
    other, osid = agent("beta")
    [res] = call(repo, blocks, "lonca:repo:status", {}, ws)
    att = res["attribution"]
    assert att["identity"] == f"agent:alpha/{sid}" and att["provenance"]["producer"] == "lonca:repo:status"
    assert res["payload"]["kind"] == "result" and res["payload"]["data"]["output"]["repo"] == "demo"
    assert res["provenance"]["input_hash"] == canonical.content_hash({})
    [sym] = call(repo, blocks, "lonca:repo:symbols", {"path": "lib/util.py"}, ws)
    assert [s["id"] for s in sym["payload"]["data"]["output"]["symbols"]] == ["lib/util.py#helper", "lib/util.py#<file>"]
    item = {"items": [{"symbol": "app.py#charge", "kind": "edit"}], "intent": "fees"}
    [got] = call(repo, blocks, "lonca:lease:acquire", item, ws)
    assert got["payload"]["data"]["output"]["decision"]["outcome"] == "allow"
    [denied] = call(repo, blocks, "lonca:lease:acquire", item, other)  # a logged denial is an outcome block
    data = denied["payload"]["data"]
    assert denied["payload"]["kind"] == "outcome" and data["status"] == "blocked" and data["kind"] == "denied"
    assert denied["attribution"]["identity"] == f"agent:beta/{osid}"
    assert data["details"]["details"][0]["holder_session"] == sid
    # streaming: one block per line; what alpha's inbox holds follows the result as a message block
    call(repo, blocks, "lonca:session:negotiate", {"thread": "t", "to_session": sid,
                                                   "message": {"type": "decline", "note": "not now"}}, other)
    lines = call(repo, blocks, "lonca:session:events", {"from": None}, ws, mode="ndjson")
    assert [b["payload"]["kind"] for b in lines] == ["result", "message"]
    assert "not now" in lines[1]["payload"]["data"]["content"] and lines[1]["payload"]["data"]["reply_to"] == "t"
    # the words are beta's: the message block is attributed to its sender, not to alpha who reads it
    assert lines[0]["attribution"]["identity"] == f"agent:alpha/{sid}"
    assert lines[1]["attribution"]["identity"] == f"agent:beta/{osid}"
    # a reading tool runs with an argument it does not take, and warns
    [warned] = call(repo, blocks, "lonca:repo:status", {"verbose": 1}, ws)
    assert "verbose" in warned["warnings"][0] and warned["payload"]["data"]["output"]["expected"]["additionalProperties"] is False
    assert blocks.seen >= 7


def test_call_failures_are_tool_errors(repo, agent):
    ws, _ = agent()
    err = tool_error(lonis(repo, "--mode", "json", "call", "lonca:lease:acquire", cwd=ws,
                           stdin='{"items": [], "intent": "x", "colour": 1}'), "invalid_input")
    assert "colour" in err["message"] and err["details"]["expected"]["required"] == ["items", "intent"]
    tool_error(lonis(repo, "--mode", "json", "call", "lonca:repo:status", cwd=ws, stdin="{not json"), "invalid_input")
    tool_error(lonis(repo, "--mode", "json", "call", "lonca:repo:nothing", cwd=ws, stdin="{}"), "not_found")
    tool_error(lonis(repo, "--mode", "json", "call", "lonca:change:propose", cwd=ws, stdin='{"intent": "x"}'), "generic")
    gone = {**repo.env, "LONCA_SOCKET": str(repo.tmp / "no.sock")}
    err = tool_error(lonis(repo, "--mode", "json", "call", "lonca:repo:status", cwd=ws, stdin="{}", env=gone), "io")
    assert "no.sock" not in err["message"]
    res = lonis(repo, "--mode", "ndjson", "call", "lonca:repo:status", cwd=repo.tmp, stdin="{}")
    assert json.loads(res.stderr)["details"]["code"] == "usage" and res.returncode == 1


def test_a_host_with_a_cleared_environment_names_the_workspace(repo, agent, blocks, tmp_path):
    ws, sid = agent()
    neutral = tmp_path / "neutral"
    neutral.mkdir()
    env = {"PATH": repo.env["PATH"], "LONCA_HOME": repo.env["LONCA_HOME"]}
    res = lonis(repo, "--mode", "json", "call", "lonca:repo:status", "--workspace", str(ws), stdin="{}", cwd=neutral, env=env)
    assert res.returncode == 0, res.stderr
    [blk] = json.loads(res.stdout)
    blocks.check(blk)
    assert blk["attribution"]["identity"].endswith(f"/{sid}")
    token = json.loads((ws / ".lonca" / "session").read_text())["token"]
    assert token not in res.stdout + res.stderr


def test_a_host_invokes_call_as_the_seed_writes_it(repo, agent, blocks, tmp_path):
    """SubprocessProvider's tool argv is `call <id>` (blocks on stdout with no --mode), and the
    lonis CLI writes `call <id> <input> --mode json`: both, and @file input, give blocks."""
    ws, sid = agent()
    plain = lonis(repo, "call", "lonca:repo:status", stdin="{}", cwd=ws)
    assert plain.returncode == 0, plain.stderr
    [blk] = json.loads(plain.stdout)
    blocks.check(blk)
    after = lonis(repo, "call", "lonca:repo:symbols", '{"path": "app.py"}', "--mode", "ndjson", cwd=ws)
    assert after.returncode == 0, after.stderr
    [sym] = [json.loads(line) for line in after.stdout.splitlines()]
    blocks.check(sym)
    assert "app.py#charge" in [s["id"] for s in sym["payload"]["data"]["output"]["symbols"]]
    (tmp_path / "in.json").write_text('{"path": "lib/util.py"}')
    got = lonis(repo, "call", "lonca:repo:symbols", f"@{tmp_path / 'in.json'}", "--mode", "json", cwd=ws)
    [util] = json.loads(got.stdout)
    assert util["payload"]["data"]["output"]["path"] == "lib/util.py"
    # --mode after the command wins over the one before it; human text only when asked for
    both = lonis(repo, "--mode", "human", "call", "lonca:repo:status", "{}", "--mode", "json", cwd=ws)
    assert json.loads(both.stdout)[0]["payload"]["kind"] == "result"
    human = lonis(repo, "call", "lonca:repo:status", "{}", "--mode", "human", cwd=ws)
    assert human.returncode == 0 and human.stdout.startswith("result: ")
    tool_error(lonis(repo, "call", "lonca:repo:symbols", "@/nonexistent.json", cwd=ws), "invalid_input")
    for discovery in (["manifest"], ["tools", "list"], ["tools", "describe", "lonca:repo:status"]):
        assert json.loads(lonis(repo, *discovery, "--mode", "json").stdout) == json.loads(lonis(repo, *discovery).stdout)
