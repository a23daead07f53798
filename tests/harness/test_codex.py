"""The real Codex CLI (`codex exec`) in a workspace that `lonca session start --harness codex`
prepared, driven offline by the scripted model server speaking the Responses API
(model_server.py): its hooks (.codex/hooks.json) call `lonca hook --harness codex`, its MCP client
mounts `lonca mcp` (.codex/config.toml), and a real worker decides. Its write tool is apply_patch,
a patch text the worker reads into what it does to each file.

Codex runs with CODEX_HOME in the test's folder, never the user's ~/.codex; the model is gpt-5.5
from the catalog Codex 0.171.0 ships (its tools are plain functions and the freeform apply_patch;
the newer models' tools sit behind a JavaScript `exec` tool), served by a custom provider on
loopback. Installed by `make harness-deps` into .harness/ (pinned); missing, the tests skip,
except in CI (CI=true), where that is a failure."""
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

CODEX = ROOT / ".harness" / "node_modules" / ".bin" / "codex"
PATCH = ("*** Begin Patch\n*** Update File: app.py\n@@ def charge(amount):\n-    return amount * 2\n"
         "+    return amount * 3\n*** End Patch\n")


@pytest.fixture(autouse=True)
def installed():
    require_cli(CODEX.exists(), "Codex")


@pytest.fixture
def database_url():
    """SQLite only: the harness, not the store, is what these tests exercise (and they are slow)."""
    return None


def codex(env, ws: Path, script: list[dict], tmp_path: Path) -> tuple[subprocess.CompletedProcess, ModelServer]:
    """`codex exec` in the workspace, with the flags setup gave (`harness setup --print`)."""
    flags = run(env.w, "harness", "setup", "codex", "--print", cwd=ws)["flags"]
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    cenv = {**env.w.env, "CODEX_HOME": str(home), "HOME": str(home), "OPENAI_API_KEY": "sk-test-offline"}
    with ModelServer(script) as model:
        provider = (f'model_providers.scripted={{name="scripted", base_url="{model.url}/v1", wire_api="responses", '
                    'env_key="OPENAI_API_KEY", supports_websockets=false, request_max_retries=0, stream_max_retries=0}')
        res = subprocess.run([str(CODEX), "exec", "-s", "workspace-write", "-m", "gpt-5.5", *flags,
                              "-c", f"model_catalog_json={json.dumps(str(catalog(home, cenv)))}",
                              "-c", "model_provider=scripted", "-c", provider, "do the task"],
                             cwd=ws, env=cenv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stdout + res.stderr
    return res, model


def catalog(home: Path, cenv: dict) -> Path:
    """gpt-5.5 as Codex ships it, but with its MCP tools given to the model up front rather than
    behind tool_search (which a scripted model would have to call first)."""
    path = home / "catalog.json"
    if not path.exists():
        shipped = subprocess.run([str(CODEX), "debug", "models", "--bundled"], env=cenv, capture_output=True,
                                 text=True, timeout=60, check=True)
        model = next(m for m in json.loads(shipped.stdout)["models"] if m["slug"] == "gpt-5.5")
        path.write_text(json.dumps({"models": [{**model, "supports_search_tool": False}]}))
    return path


def outputs(model: ModelServer) -> list[str]:
    """The text of each tool output Codex sent back, in order."""
    out = []
    for item in model.codex_outputs():
        body = item["output"]
        out.append(body if isinstance(body, str) else "\n".join(c.get("text", "") for c in body if isinstance(c, dict)))
    return out


def proposed(text: str) -> dict:
    """propose's answer in a tool output (after Codex's own `Wall time` line)."""
    return json.loads(text[text.index("{"):])


def test_leased_patch_runs_and_propose_through_mcp_integrates(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "codex")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    _, model = codex(repo_env, ws, [
        tool_use("apply_patch", PATCH),
        tool_use("propose", {"intent": "triple the charge"}, namespace="mcp__lonca"),
        text("done"),
    ], tmp_path)
    assert "return amount * 3" in (ws / "app.py").read_text()
    results = outputs(model)
    assert len(results) == 2 and "Lonca denied" not in results[0], results
    change = proposed(results[1])
    assert change["status"] == "queued", change
    assert wait_status(repo_env, change["change"], "integrated")["provenance"] == "clean"
    sess = session_of(repo_env, ws)
    assert sess["level"] == "hooks" and sess["bound_ms"] and sess["unhooked"] is None and sess["taint"] is None
    # the rules and the session reached the model: .codex/config.toml and the SessionStart hook
    first = json.dumps(model.turns[0])
    assert "Working in a Lonca workspace" in first and "mcp__lonca__lease_acquire" in first
    # setup's files are never local changes: the patch is the only one
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ws, capture_output=True, text=True)
    assert changed.stdout.splitlines() == [" M app.py"]


def test_patch_of_a_symbol_another_session_holds_is_denied_at_the_tool_call(repo_env, tmp_path):
    bob = repo_env.agent("bob")
    acquire(repo_env.client, bob["token"], "app.py#charge", intent="rewrite the pricing")
    ws = start(repo_env, tmp_path, "ada", "codex")
    before = (ws / "app.py").read_text()
    # the patch as its tool, then as the shell heredoc Codex also applies
    heredoc = f"cd {ws} && apply_patch <<'EOF'\n{PATCH}EOF\n"
    _, model = codex(repo_env, ws, [tool_use("apply_patch", PATCH), tool_use("exec_command", {"cmd": heredoc}),
                                    text("ok")], tmp_path)
    assert (ws / "app.py").read_text() == before
    for reason in outputs(model):
        assert "lease_missing:app.py#charge" in reason and "bob" in reason and "rewrite the pricing" in reason, reason
        assert "lonca lease interest 'app.py#charge' --kind edit" in reason
    entries = repo_env.client.call("log", {"from": 1}, repo="demo", token=repo_env.token)
    writes = [e["entry"]["op"]["events"][0] for e in entries if e["entry"]["op"]["op"] == "observe"
              and e["entry"]["op"]["events"][0]["kind"] == "write"]
    assert [(w["tool"], w["paths"], w["decision"], w["reasons"]) for w in writes] == [
        (tool, ["app.py"], "deny", ["lease_missing:app.py#charge"]) for tool in ("apply_patch", "Bash")]


def test_stop_with_an_unproposed_change_is_sent_back_once(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "codex")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    _, model = codex(repo_env, ws, [
        tool_use("apply_patch", PATCH),
        text("finished"),        # stop: sent back with Lonca's message
        text("finished again"),  # stop again: past stop_rounds (1), the turn ends
    ], tmp_path)
    assert len(model.turns) == 3
    sent_back = [t for t in model.codex_texts() if "no proposal carries" in t]
    assert len(sent_back) == 1 and "app.py" in sent_back[0], model.codex_texts()
    sess = session_of(repo_env, ws)
    assert sess["unproposed"]["paths"] == ["app.py"] and sess["unproposed"]["rounds"] == 2


def test_hooks_removed_session_is_unhooked_and_its_proposal_escalates(repo_env, tmp_path):
    ws = start(repo_env, tmp_path, "ada", "codex")
    run(repo_env.w, "lease", "acquire", "app.py#charge", "--intent", "triple the charge", cwd=ws)
    (ws / ".codex" / "hooks.json").unlink()
    _, model = codex(repo_env, ws, [
        tool_use("apply_patch", PATCH),
        tool_use("propose", {"intent": "triple the charge"}, namespace="mcp__lonca"),
        text("done"),
    ], tmp_path)
    assert "return amount * 3" in (ws / "app.py").read_text()
    change = proposed(outputs(model)[1])
    assert change["status"] == "pending" and "unhooked_session" in change["decision"]["reasons"], change
    sess = session_of(repo_env, ws)
    assert sess["unhooked"]["tool"] == "propose" and sess["taint"] == "unhooked_session"
    assert sess["level"] == "unobserved" and sess["bound_ms"] is None
    assert next(c for c in repo_env.status()["changes"] if c["change"] == change["change"])["provenance"] == "tainted"
