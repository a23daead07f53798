"""`lonca harness setup`, `session start --harness` and `lonca hook` as processes: what setup writes
and refuses, that its files are never local changes, and `lonca hook` fed the JSON each harness
sends (Claude Code's as it sent it here; Gemini CLI's from its published hooks reference)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, git_repo
from helpers import acquire

SETUP_FILES = {".claude/settings.json", ".mcp.json", ".claude/CLAUDE.md"}


@pytest.fixture
def database_url():
    """SQLite only: these tests exercise the client side."""
    return None


def cli(w, *args, cwd=None):
    return w.cli(*args, cwd=cwd)


def start(w, ws: Path, *extra: str) -> subprocess.CompletedProcess:
    return cli(w, "session", "start", "--repo", "demo", "--agent", "ada", "--dir", str(ws), *extra, "--json")


def hook(w, ws: Path, harness: str, payload: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lonca", "hook", "--harness", harness, "--workspace", str(ws)],
                          input=json.dumps(payload), env=w.env, cwd=ws, capture_output=True, text=True, timeout=60)


def test_setup_writes_only_in_the_workspace_and_never_a_local_change(repo_env, tmp_path):
    w = repo_env.w
    ws = tmp_path / "ws"
    res = start(w, ws, "--harness", "claude-code", "--no-setup")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["setup"] is None and not (ws / ".claude").exists()
    sid = json.loads(res.stdout)["session"]
    assert next(s for s in repo_env.status()["sessions"] if s["id"] == sid)["harness"] == "claude-code"
    shown = json.loads(cli(w, "harness", "setup", "claude-code", "--print", "--json", cwd=ws).stdout)
    assert shown["written"] == [] and set(shown["files"]) == SETUP_FILES and not (ws / ".mcp.json").exists()
    assert shown["known"] and shown["flags"] == ["--allowedTools", "mcp__lonca"] and "lease" in shown["rules"]
    settings = json.loads(shown["files"][".claude/settings.json"])
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert "hook --harness claude-code --workspace" in command and str(w.home) in command
    done = json.loads(cli(w, "harness", "setup", "claude-code", "--json", cwd=ws).stdout)
    assert set(done["written"]) == SETUP_FILES
    assert json.loads((ws / ".mcp.json").read_text())["mcpServers"]["lonca"]["command"] == "sh"
    status = git("status", "--porcelain", "--untracked-files=all", cwd=ws)
    assert status == ""
    again = cli(w, "harness", "setup", "claude-code", "--json", cwd=ws)    # its own files: the same text
    assert again.returncode == 0, again.stderr
    (ws / ".claude" / "CLAUDE.md").write_text("my own notes\n")
    refused = cli(w, "harness", "setup", "claude-code", "--json", cwd=ws)
    assert refused.returncode == 3 and ".claude/CLAUDE.md: a local file is there" in refused.stderr
    assert (ws / ".claude" / "CLAUDE.md").read_text() == "my own notes\n"
    assert json.loads(cli(w, "rules", "--json").stdout)["rules"] == shown["rules"]
    other = json.loads(cli(w, "harness", "setup", "aider", "--print", "--json", cwd=ws).stdout)
    assert not other["known"] and other["files"] == {} and other["mcp"]["args"][-1] == "mcp"


def test_codex_setup_registers_hooks_mcp_and_rules_in_its_folder(repo_env, tmp_path):
    import tomllib
    w = repo_env.w
    ws = tmp_path / "ws"
    res = start(w, ws, "--harness", "codex")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)["setup"]
    assert set(report["written"]) == {".codex/hooks.json", ".codex/config.toml"}
    assert report["flags"] == ["--trust", "--dangerously-bypass-hook-trust"]
    hooks = json.loads((ws / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"}
    assert "hook --harness codex --workspace" in hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert "matcher" not in hooks["PreToolUse"][0]     # every tool: apply_patch, the shell, MCP tools
    config = tomllib.loads((ws / ".codex" / "config.toml").read_text())
    assert config["developer_instructions"] == report["rules"]
    server = config["mcp_servers"]["lonca"]
    assert [server["command"], *server["args"]] == [report["mcp"]["command"], *report["mcp"]["args"]]
    assert server["cwd"] == str(ws) and server["env"]["LONCA_HOME"] == str(w.home)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=ws) == ""


def test_a_tracked_file_or_a_symlink_at_a_target_is_refused_and_nothing_written(worker, tmp_path, monkeypatch):
    from helpers import RepoEnv
    src = git_repo(tmp_path / "src", {".mcp.json": "{}\n", "app.py": "x = 1\n"})
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    env = RepoEnv(worker, src)
    ws = tmp_path / "ws"
    res = start(worker, ws, "--harness", "claude-code")
    assert res.returncode == 3 and res.stdout == ""
    assert "started" in res.stderr and ".mcp.json: the repository has this file" in res.stderr
    assert not (ws / ".claude").exists() and (ws / ".mcp.json").read_text() == "{}\n"
    ws2 = tmp_path / "ws2"
    assert start(worker, ws2, "--harness", "claude-code", "--no-setup").returncode == 0
    git("rm", "-q", ".mcp.json", cwd=ws2)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", ws2 / ".claude")
    refused = cli(worker, "harness", "setup", "claude-code", "--json", cwd=ws2)
    assert refused.returncode == 3 and ".claude/settings.json: a symlink" in refused.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not (ws2 / ".mcp.json").exists()
    env.client.close()


def test_lonca_hook_answers_in_each_harness_shape(repo_env, tmp_path):
    w = repo_env.w
    bob = repo_env.agent("bob")
    acquire(repo_env.client, bob["token"], "app.py#charge", intent="rewrite the pricing")
    edits = {"old_string": "return amount * 2", "new_string": "return amount * 3"}
    for harness, event, tool, shape in [
        ("claude-code", "PreToolUse", "Edit", lambda out: out["hookSpecificOutput"]["permissionDecisionReason"]),
        ("gemini", "BeforeTool", "replace", lambda out: out["reason"] if out["decision"] == "deny" else None),
    ]:
        ws = tmp_path / harness
        assert start(w, ws, "--harness", harness, "--no-setup").returncode == 0
        base = {"session_id": "h-1", "transcript_path": "/dev/null", "cwd": str(ws)}
        bound = hook(w, ws, harness, {**base, "hook_event_name": "SessionStart", "source": "startup"})
        assert bound.returncode == 0, bound.stderr     # the session, for the model, as SessionStart context
        assert "Lonca: this workspace is session" in json.loads(bound.stdout)["hookSpecificOutput"]["additionalContext"]
        res = hook(w, ws, harness, {**base, "hook_event_name": event, "tool_name": tool,
                                    "tool_input": {"file_path": str(ws / "app.py"), **edits}})
        assert res.returncode == 0, res.stderr
        assert "lease_missing:app.py#charge" in shape(json.loads(res.stdout)) and "bob" in res.stdout
        sid = json.loads((ws / ".lonca" / "workspace.json").read_text())["session"]
        assert next(s for s in repo_env.status()["sessions"] if s["id"] == sid)["level"] == "hooks"
    # after a tool call, what another session wants reaches the model once, as context
    ws = tmp_path / "claude-code"
    sid = json.loads((ws / ".lonca" / "workspace.json").read_text())["session"]
    repo_env.client.call("negotiate", {"thread": "t1", "to_session": sid, "message": {
        "type": "counter", "note": "leave charge to me until noon"}}, token=bob["token"])
    after = {"session_id": "h-1", "cwd": str(ws), "hook_event_name": "PostToolUse", "tool_name": "Bash",
             "tool_input": {"command": "ls"}, "tool_response": {}}
    told = hook(w, ws, "claude-code", after)
    assert told.returncode == 0, told.stderr
    context = json.loads(told.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "PostToolUse" and "leave charge to me until noon" in context["additionalContext"]
    assert hook(w, ws, "claude-code", after).stdout == ""
    # not JSON, or no workspace: a non-blocking error of the hook, never a decision
    bad = hook(w, tmp_path / "claude-code", "claude-code", {"hook_event_name": "Stop"} | {"cwd": "/"})
    assert bad.returncode == 0 and bad.stdout == ""   # a clean workspace: nothing to say
    broken = subprocess.run([sys.executable, "-m", "lonca", "hook"], input="not json", env=w.env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode == 1 and broken.stdout == "" and "no JSON" in broken.stderr


# What Codex 0.171.0 sent its hooks here (tests/harness/test_codex.py drives it for real), with its
# own session id and paths: `lonca hook --harness codex` reads each and answers in Codex's shape.
def codex_input(ws: Path, event: str, **fields) -> dict:
    return {"session_id": "01a22d8d-2374-7cb2-b679-a6656cf0a751", "transcript_path": "/tmp/codex-home/sessions/x.jsonl",
            "cwd": str(ws), "hook_event_name": event, "model": "gpt-5.5", "permission_mode": "bypassPermissions",
            **({"turn_id": "01a22d8d-238b-7d71-bab2-881090055378"} if event != "SessionStart" else {}), **fields}


PATCH = ("*** Begin Patch\n*** Update File: app.py\n@@ def charge(amount):\n-    return amount * 2\n"
         "+    return amount * 3\n*** End Patch\n")


def test_lonca_hook_reads_codex_events(repo_env, tmp_path):
    w = repo_env.w
    bob = repo_env.agent("bob")
    acquire(repo_env.client, bob["token"], "app.py#charge", intent="rewrite the pricing")
    ws = tmp_path / "ws"
    assert start(w, ws, "--harness", "codex", "--no-setup").returncode == 0
    started = hook(w, ws, "codex", codex_input(ws, "SessionStart", source="startup"))
    assert started.returncode == 0, started.stderr
    context = json.loads(started.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart" and "mcp__lonca__lease_acquire" in context["additionalContext"]
    pre = codex_input(ws, "PreToolUse", tool_name="apply_patch", tool_input={"command": PATCH}, tool_use_id="call_1")
    denied = hook(w, ws, "codex", pre)
    assert denied.returncode == 0, denied.stderr
    out = json.loads(denied.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "lease_missing:app.py#charge" in out["permissionDecisionReason"]
    assert "bob" in out["permissionDecisionReason"]
    # a shell command runs (its writes are judged at propose), and after it the inbox's news comes once
    shell = codex_input(ws, "PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="call_2")
    assert hook(w, ws, "codex", shell).stdout == ""
    sid = json.loads((ws / ".lonca" / "workspace.json").read_text())["session"]
    repo_env.client.call("negotiate", {"thread": "t1", "to_session": sid, "message": {
        "type": "counter", "note": "leave charge to me until noon"}}, token=bob["token"])
    after = codex_input(ws, "PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                        tool_response="Exit code: 0\nWall time: 0.1 seconds\nOutput:\napp.py\n", tool_use_id="call_2")
    told = json.loads(hook(w, ws, "codex", after).stdout)["hookSpecificOutput"]
    assert told["hookEventName"] == "PostToolUse" and "leave charge to me until noon" in told["additionalContext"]
    prompt = codex_input(ws, "UserPromptSubmit", prompt="go on")
    assert hook(w, ws, "codex", prompt).stdout == ""        # told already
    (ws / "app.py").write_text((ws / "app.py").read_text().replace("* 2", "* 5"))
    stop = hook(w, ws, "codex", codex_input(ws, "Stop", stop_hook_active=False, last_assistant_message="done"))
    back = json.loads(stop.stdout)
    assert back["decision"] == "block" and "app.py" in back["reason"]
