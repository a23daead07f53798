"""The real Claude Code CLI (`claude -p … --output-format json`) in a workspace that `lonca session
start --harness claude-code` prepared, driven offline by a scripted Messages API server
(model_server.py): its real hook machinery calls `lonca hook`, its real MCP client mounts
`lonca mcp`, and a real worker decides.

The CLI is installed by `make harness-deps` into .harness/ (pinned); without it the tests skip,
except in CI (CI=true), where a missing CLI fails them."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from model_server import ModelServer, text, tool_use  # noqa: E402

from conftest import ROOT  # noqa: E402
from helpers import acquire  # noqa: E402
from harness_runs import require_cli, run, session_of, start, wait_status  # noqa: E402


def claude_binary() -> Path | None:
    """The native binary the npm package ships for this platform (the package's own launcher is a
    placeholder until its install script runs, which `make harness-deps` skips)."""
    found = sorted((ROOT / ".harness" / "node_modules" / "@anthropic-ai").glob("claude-code-linux-*/claude"))
    return found[0] if found else None


CLAUDE = claude_binary()


@pytest.fixture(autouse=True)
def installed():
    require_cli(CLAUDE is not None, "Claude Code")


@pytest.fixture
def database_url():
    """SQLite only: the harness, not the store, is what these tests exercise (and they are slow)."""
    return None


def claude(env, ws: Path, script: list[dict], tmp_path: Path) -> tuple[dict, ModelServer]:
    """`claude -p` in the workspace, with the flags setup gave (`harness setup --print`)."""
    flags = run(env.w, "harness", "setup", "claude-code", "--print", cwd=ws)["flags"]
    home = tmp_path / "claude-home"
    home.mkdir(exist_ok=True)
    with ModelServer(script) as model:
        cenv = {**env.w.env, "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-test-offline",
                "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HOME": str(home)}
        res = subprocess.run([str(CLAUDE), "-p", "do the task", "--output-format", "json", "--permission-mode", "acceptEdits", *flags],
                             cwd=ws, env=cenv, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout), model


EDIT = {"old_string": "return amount * 2", "new_string": "return amount * 3"}


def test_leased_edit_runs_and_propose_through_mcp_integrates(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "claude-code")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    result, model = claude(repo_env, ws, [
        tool_use("Edit", {"file_path": str(ws / "app.py"), **EDIT}),
        tool_use("mcp__lonca__propose", {"intent": "triple the charge"}),
        text("done"),
    ], tmp_path)
    assert result["permission_denials"] == [] and not result["is_error"], model.tool_results()
    assert "return amount * 3" in (ws / "app.py").read_text()
    results = model.tool_results()
    assert len(results) == 2, results
    proposed = json.loads(results[1]["content"][0]["text"] if isinstance(results[1]["content"], list) else results[1]["content"])
    assert proposed["status"] == "queued", proposed
    ch = wait_status(repo_env, proposed["change"], "integrated")
    assert ch["provenance"] == "clean"
    sess = session_of(repo_env, ws)
    assert sess["level"] == "hooks" and sess["bound_ms"] and sess["unhooked"] is None and sess["taint"] is None
    assert sess["last_hook_ms"]
    # setup's files are never local changes: the edit is the only one
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ws, capture_output=True, text=True)
    assert changed.stdout.splitlines() == [" M app.py"]


def test_edit_of_a_symbol_another_session_holds_is_denied_at_the_tool_call(repo_env, tmp_path):
    bob = repo_env.agent("bob")
    acquire(repo_env.client, bob["token"], "app.py#charge", intent="rewrite the pricing")
    ws = start(repo_env, tmp_path, "ada", "claude-code")
    before = (ws / "app.py").read_text()
    result, model = claude(repo_env, ws, [tool_use("Edit", {"file_path": str(ws / "app.py"), **EDIT}), text("ok")], tmp_path)
    assert (ws / "app.py").read_text() == before
    denied = result["permission_denials"]
    assert [d["tool_name"] for d in denied] == ["Edit"]
    reason = str(model.tool_results()[0]["content"])
    assert "lease_missing:app.py#charge" in reason and "bob" in reason and "rewrite the pricing" in reason
    assert "lonca lease interest 'app.py#charge' --kind edit" in reason
    # the denial is an observation in the log
    entries = repo_env.client.call("log", {"from": 1}, repo="demo", token=repo_env.token)
    writes = [e["entry"]["op"]["events"][0] for e in entries if e["entry"]["op"]["op"] == "observe"
              and e["entry"]["op"]["events"][0]["kind"] == "write"]
    assert writes[-1]["decision"] == "deny" and writes[-1]["paths"] == ["app.py"]


def test_stop_with_an_unproposed_change_is_sent_back_once(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "claude-code")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    result, model = claude(repo_env, ws, [
        tool_use("Edit", {"file_path": str(ws / "app.py"), **EDIT}),
        text("finished"),        # stop: sent back with Lonca's message
        text("finished again"),  # stop again: past stop_rounds (1), the turn ends
    ], tmp_path)
    assert not result["is_error"]
    sent_back = [t for t in model.user_texts() if "no proposal carries" in t]
    assert len(sent_back) == 1 and "app.py" in sent_back[0], model.user_texts()
    assert len(model.turns) == 3
    sess = session_of(repo_env, ws)
    assert sess["unproposed"]["paths"] == ["app.py"] and sess["unproposed"]["rounds"] == 2


def test_hooks_removed_session_is_unhooked_and_its_proposal_escalates(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "claude-code")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    settings = ws / ".claude" / "settings.json"
    kept = json.loads(settings.read_text())
    del kept["hooks"]
    settings.write_text(json.dumps(kept))
    result, model = claude(repo_env, ws, [
        tool_use("Edit", {"file_path": str(ws / "app.py"), **EDIT}),
        tool_use("mcp__lonca__propose", {"intent": "triple the charge"}),
        text("done"),
    ], tmp_path)
    assert "return amount * 3" in (ws / "app.py").read_text()
    proposed = json.loads(model.tool_results()[1]["content"][0]["text"])
    assert proposed["status"] == "pending"
    assert "unhooked_session" in proposed["decision"]["reasons"]
    sess = session_of(repo_env, ws)
    assert sess["unhooked"]["tool"] == "propose" and sess["taint"] == "unhooked_session"
    assert sess["level"] == "unobserved" and sess["bound_ms"] is None
    ch = next(c for c in repo_env.status()["changes"] if c["change"] == proposed["change"])
    assert ch["provenance"] == "tainted"
