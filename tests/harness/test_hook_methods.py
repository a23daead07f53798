"""hook.event, hook.bind, hook.stop and mcp.call against a real worker over its socket (SQLite and
PostgreSQL): what a write step is judged on, how levels and taint are read, the stop rounds, and
what a proposal of an observed session escalates."""
import subprocess

import pytest

from harness_runs import wait_status
from helpers import acquire, b64, propose
from lonca.protocol import LoncaError

WS = "/work/ws-of-the-test"
APP = "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


def agent(env, name: str = "ada", harness: str | None = "claude-code") -> str:
    extra = {"harness": harness} if harness else {}
    return env.agent(name, **extra)["token"]


def trunk(env) -> str:
    return env.status()["trunk"]


def pre(env, token: str, tool: str, tool_input: dict, held: str | None = APP, base: str | None = None) -> dict:
    params = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "cwd": WS,
              "workspace": WS, "harness": "claude-code", "base": base or trunk(env),
              "files": [] if held is None else [{"path": "app.py", "content_b64": b64(held), "mode": None}]}
    return env.client.call("hook.event", params, token=token)


def edit(old: str, new: str, path: str = "app.py") -> dict:
    return {"file_path": f"{WS}/{path}", "old_string": old, "new_string": new, "replace_all": False}


def session(env, token: str) -> dict:
    return env.client.call("whoami", {}, token=token)["session"]


def test_a_write_step_is_judged_on_the_symbols_it_changes(repo_env):
    env = repo_env
    ada = agent(env)
    acquire(env.client, ada, "app.py#charge", intent="triple the charge")
    assert pre(env, ada, "Edit", edit("amount * 2", "amount * 3"))["decision"] == "allow"
    # the file as the workspace holds it: an earlier local edit is where this one starts
    local = APP.replace("amount * 2", "amount * 3")
    assert pre(env, ada, "Edit", edit("amount * 3", "amount * 4"), held=local)["decision"] == "allow"
    res = pre(env, ada, "Edit", edit("return charge(1)", "return charge(2)"))
    assert res["decision"] == "deny"
    assert res["reason"].startswith("Lonca denied this edit (lease_missing:app.py#Client.pay)")
    assert "lonca lease acquire 'app.py#Client.pay' --kind edit" in res["reason"]
    multi = {"file_path": f"{WS}/app.py", "edits": [{"old_string": "amount * 2", "new_string": "amount * 5"},
                                                     {"old_string": "charge(1)", "new_string": "charge(3)"}]}
    res = pre(env, ada, "MultiEdit", multi)
    assert res["decision"] == "deny" and "app.py#Client.pay" in res["reason"] and "(lease_missing:app.py#charge)" not in res["reason"]
    new_file = pre(env, ada, "Write", {"file_path": f"{WS}/lib/new.py", "content": "x = 1\n"}, held=None)
    assert new_file["decision"] == "deny" and "lease_missing:lib/new.py#<file>" in new_file["reason"]
    # a tool that will fail on its own (no such text) is left to fail
    assert pre(env, ada, "Edit", edit("no such text", "y"))["decision"] == "allow"
    # the workspace's own files, never; outside the workspace, not observed
    private = pre(env, ada, "Write", {"file_path": f"{WS}/.lonca/session", "content": "{}"}, held=None)
    assert private["decision"] == "deny" and "workspace_private:.lonca/session" in private["reason"]
    outside = pre(env, ada, "Write", {"file_path": "/tmp/notes.txt", "content": "x"}, held=None)
    assert outside["decision"] == "allow"
    # tools that write nothing, and the event after a tool, are not judged
    assert pre(env, ada, "Bash", {"command": "ls"}, held=None)["decision"] == "allow"
    events = [e["entry"]["op"]["events"][0] for e in env.client.call("log", {"from": 1}, repo="demo", token=env.token)
              if e["entry"]["op"]["op"] == "observe"]
    # the second allowed write of app.py changes nothing the log holds (it was seen written): no entry
    assert [(e["decision"], e["paths"]) for e in events] == [
        ("allow", ["app.py"]), ("deny", ["app.py"]), ("deny", ["app.py"]),
        ("deny", ["lib/new.py"]), ("deny", [".lonca/session"])]


def test_a_symbol_another_session_holds_names_the_holder_and_scope_bounds_paths(repo_env):
    env = repo_env
    bob = agent(env, "bob")
    acquire(env.client, bob, "app.py#charge", intent="rewrite the pricing")
    ada = agent(env)
    res = pre(env, ada, "Edit", edit("amount * 2", "amount * 3"))
    assert res["decision"] == "deny"
    assert "held by bob" in res["reason"] and "rewrite the pricing" in res["reason"]
    assert "lonca lease interest 'app.py#charge'" in res["reason"]
    op_scope = {"paths": ["lib/**"], "symbols": None, "ops": [], "max_files": None, "max_lines": None, "scratch": []}
    cy = env.agent("cy", harness="claude-code", scope=op_scope)["token"]
    res = pre(env, cy, "Edit", edit("amount * 2", "amount * 3"))
    assert res["decision"] == "deny" and res["reason"].startswith("Lonca denied this write (scope_path:app.py)")
    # reads: in the workspace, nothing; outside it and the scratch roots, the session is tainted (once)
    assert pre(env, cy, "Read", {"file_path": f"{WS}/app.py"}, held=None) == {"decision": "allow", "reason": ""}
    assert session(env, cy)["taint"] is None
    assert pre(env, cy, "Read", {"file_path": "/etc/hosts"}, held=None)["decision"] == "allow"
    seq = env.status()["next_seq"]
    pre(env, cy, "Grep", {"pattern": "x", "path": "/usr"}, held=None)
    assert env.status()["next_seq"] == seq and session(env, cy)["taint"] == "read_outside:/etc/hosts"
    acquire(env.client, cy, "lib/util.py#helper", intent="x")
    res = propose(env.client, cy, trunk(env), {"lib/util.py": "def helper():\n    return 43\n"})
    assert res["decision"] == {"outcome": "escalate", "reasons": ["tainted_session"]}


def test_bind_reads_a_level_for_the_session_harness_only_and_never_raises_it(repo_env):
    env = repo_env
    ada = agent(env)

    def bind(token, harness):
        return env.client.call("hook.bind", {"harness": harness, "harness_session": "h-1",
                                             "sudo_without_password": False, "workspace": WS}, token=token)
    first = bind(ada, "claude-code")
    assert first["level"] == "hooks" and first["decision"]["outcome"] == "allow" and first["scratch"] == []
    assert session(env, ada)["bound_ms"]
    other = bind(ada, "gemini")     # not the session's harness: no level is read, and it drops
    assert other["level"] == "unobserved" and other["notes"]
    again = bind(ada, "claude-code")
    assert again["decision"] == {"outcome": "deny", "reasons": ["bind_raises_level"]} and again["level"] == "unobserved"
    plain = agent(env, "cy", harness=None)
    assert bind(plain, "claude-code")["level"] == "unobserved"


def test_mcp_call_without_its_before_tool_event_marks_the_session_unhooked_once(repo_env):
    env = repo_env
    ada = agent(env)
    pre(env, ada, "mcp__lonca__status", {}, held=None)
    assert env.client.call("mcp.call", {"tool": "status"}, token=ada) == {"checked": True, "hooked": True}
    seq = env.status()["next_seq"]
    # the first answers the seq of its unhooked observation, the one logged per session
    assert env.client.call("mcp.call", {"tool": "status"}, token=ada) == {"checked": True, "hooked": False, "seq": seq}
    assert env.client.call("mcp.call", {"tool": "propose"}, token=ada) == {"checked": True, "hooked": False}
    assert env.status()["next_seq"] == seq + 1
    rec = session(env, ada)
    assert rec["unhooked"]["tool"] == "status" and rec["taint"] == "unhooked_session" and rec["level"] == "unobserved"
    # its proposals escalate, critical paths named
    acquire(env.client, ada, "app.py#charge", intent="x")
    res = propose(env.client, ada, trunk(env), {"app.py": APP.replace("* 2", "* 3")})
    assert res["decision"]["outcome"] == "escalate" and "unhooked_session" in res["decision"]["reasons"]
    # a session with no harness named is not compared
    plain = agent(env, "cy", harness=None)
    assert env.client.call("mcp.call", {"tool": "status"}, token=plain) == {"checked": False, "hooked": None}
    with pytest.raises(LoncaError) as e:
        env.client.call("mcp.call", {"tool": "Status!"}, token=ada)
    assert e.value.code == "invalid"


def _blob(text: str) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=text.encode(), capture_output=True, check=True).stdout.decode().strip()


def test_stop_sends_back_within_stop_rounds_and_a_proposal_carries_the_files(repo_env):
    env = repo_env
    ada = agent(env)
    acquire(env.client, ada, "app.py#charge", intent="x")
    changed = APP.replace("* 2", "* 3")
    files = [{"path": "app.py", "entry": {"mode": "regular", "blob": _blob(changed)}}]
    first = env.client.call("hook.stop", {"harness": "claude-code", "files": files}, token=ada)
    assert first["unproposed"] == ["app.py"] and first["round"] == 1 and first["limit"] == 1
    assert first["output"]["decision"] == "block" and "app.py" in first["output"]["reason"]
    second = env.client.call("hook.stop", {"harness": "claude-code", "files": files}, token=ada)
    assert second["round"] == 2 and "output" not in second
    assert session(env, ada)["unproposed"]["rounds"] == 2
    proposed = propose(env.client, ada, trunk(env), {"app.py": changed})
    assert proposed["decision"]["outcome"] != "deny"
    assert session(env, ada)["unproposed"] is None
    clean = env.client.call("hook.stop", {"harness": "claude-code", "files": files}, token=ada)
    assert {k: clean[k] for k in ("unproposed", "total", "round", "limit")} == {"unproposed": [], "total": 0, "round": 0, "limit": 1}
    wait_status(env, proposed["change"], "integrated")
    # integrated, the change is settled: its record is read from the settled_changes table
    assert env.client.call("hook.stop", {"harness": "claude-code", "files": files}, token=ada)["unproposed"] == []
    seq = env.status()["next_seq"]
    env.client.call("hook.stop", {"harness": "claude-code", "files": files}, token=ada)
    assert env.status()["next_seq"] == seq      # a clean report is new once
    for entry in ({"blob": "x"}, {"mode": None}):     # a local file's entry names its blob (the fuzzer's internal)
        with pytest.raises(LoncaError) as e:
            env.client.call("hook.stop", {"harness": "claude-code", "files": [{"path": "app.py", "entry": entry}]}, token=ada)
        assert e.value.code == "invalid"
    # session.end reports the same way: what a standing proposal carries is not left behind
    extra = {"path": "notes.md", "entry": {"mode": "regular", "blob": _blob("n\n")}}
    ended = env.client.call("session.end", {"files": files + [extra]}, token=ada)
    assert ended["unproposed"] == ["notes.md"] and ended["unproposed_total"] == 1


def test_a_hooked_session_escalates_what_its_hooks_never_saw_written_and_replay_keeps_it(repo_env):
    env = repo_env
    ada = agent(env)
    env.client.call("hook.bind", {"harness": "claude-code", "harness_session": "h", "sudo_without_password": False,
                                  "workspace": WS}, token=ada)
    acquire(env.client, ada, "app.py#charge", "lib/util.py#helper", intent="x")
    assert pre(env, ada, "Edit", edit("amount * 2", "amount * 3"))["decision"] == "allow"
    # the worker restarts: level and what was seen written come back from the log
    env.w.stop()
    env.w.start()
    env.client = env.w.client().connect()
    files = {"app.py": APP.replace("* 2", "* 3"), "lib/util.py": "def helper():\n    return 43\n"}
    res = propose(env.client, ada, trunk(env), files)
    assert res["decision"] == {"outcome": "escalate", "reasons": ["unobserved_write:lib/util.py"]}
    ch = next(c for c in env.status()["changes"] if c["change"] == res["change"])
    assert ch["provenance"] == "unobserved"
    only_seen = propose(env.client, ada, trunk(env), {"app.py": files["app.py"]})
    assert only_seen["decision"]["outcome"] == "allow"
    ch = next(c for c in env.status()["changes"] if c["change"] == only_seen["change"])
    assert ch["provenance"] == "clean"
    assert session(env, ada)["level"] == "hooks"


BAD_EVENTS = [
    {"hook_event_name": "PreToolUse", "workspace": WS, "extra": 1},
    {"hook_event_name": "Stop", "workspace": WS},
    {"hook_event_name": "PreToolUse", "workspace": "relative/ws"},
    {"hook_event_name": "PreToolUse", "workspace": WS, "tool_input": []},
    {"hook_event_name": "PreToolUse", "workspace": WS, "tool_name": "Edit", "tool_input": {"file_path": 3}},
]


def test_params_are_checked_strictly_and_harness_setup_is_null_without_the_policy_s_setup(repo_env):
    ada = agent(repo_env)
    for params in BAD_EVENTS:
        with pytest.raises(LoncaError) as e:
            repo_env.client.call("hook.event", params, token=ada)
        assert e.value.code == "invalid", params
    # the seed: a harness Lonca does not know is denied (not invalid), whatever its event
    for event in ("PreToolUse", "PostToolUse"):
        unknown = repo_env.client.call("hook.event", {"hook_event_name": event, "workspace": WS, "harness": "vim",
                                                      "tool_name": "Edit", "tool_input": {}}, token=ada)
        assert unknown["decision"] == "deny" and "'vim'" in unknown["reason"]
    for method, params in [("hook.bind", {"harness": "claude-code"}), ("hook.stop", {"harness": "claude-code"}),
                           ("hook.stop", {"harness": "nano", "files": []}), ("mcp.call", {"tool": "x", "more": 1}),
                           ("hook.bind", {"harness": "nano", "harness_session": "h", "sudo_without_password": False})]:
        with pytest.raises(LoncaError) as e:
            repo_env.client.call(method, params, token=ada)
        assert e.value.code == "invalid", (method, params)

    assert repo_env.client.call("harness.setup", {"harness": "claude-code"}, token=agent(repo_env)) == {"setup": None}


def codex_pre(env, token: str, patch: str, held: dict[str, str]) -> dict:
    params = {"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": patch},
              "cwd": WS, "workspace": WS, "harness": "codex", "base": trunk(env),
              "files": [{"path": p, "content_b64": b64(t), "mode": None} for p, t in held.items()]}
    return env.client.call("hook.event", params, token=token)


def test_a_codex_patch_is_judged_on_every_file_it_writes(repo_env):
    env = repo_env
    ada = agent(env, harness="codex")
    acquire(env.client, ada, "app.py#charge", intent="triple the charge")
    charge = "*** Update File: app.py\n@@ def charge(amount):\n-    return amount * 2\n+    return amount * 3\n"
    assert codex_pre(env, ada, f"*** Begin Patch\n{charge}*** End Patch\n", {"app.py": APP})["decision"] == "allow"
    both = codex_pre(env, ada, f"*** Begin Patch\n{charge}*** Add File: lib/new.py\n+x = 1\n*** End Patch\n",
                     {"app.py": APP})
    assert both["decision"] == "deny" and "lease_missing:lib/new.py#<file>" in both["reason"]
    assert "app.py#charge" not in both["reason"]
    gone = codex_pre(env, ada, "*** Begin Patch\n*** Delete File: app.py\n*** End Patch\n", {"app.py": APP})
    assert gone["decision"] == "deny" and "lease_missing:app.py#<file>" in gone["reason"]
    moved = codex_pre(env, ada, "*** Begin Patch\n*** Update File: app.py\n*** Move to: /elsewhere/app.py\n"
                                "@@ def charge(amount):\n-    return amount * 2\n+    return amount * 3\n*** End Patch\n",
                      {"app.py": APP})
    assert moved["decision"] == "deny"      # leaving the workspace deletes app.py there
    private = codex_pre(env, ada, "*** Begin Patch\n*** Add File: .lonca/session\n+{}\n*** End Patch\n", {})
    assert private["decision"] == "deny" and "workspace_private:.lonca/session" in private["reason"]
    # what Codex refuses by itself (no such lines, not a patch) and what lies outside run unjudged
    assert codex_pre(env, ada, "*** Begin Patch\n*** Update File: app.py\n@@\n-nope\n+x\n*** End Patch\n",
                     {"app.py": APP})["decision"] == "allow"
    assert codex_pre(env, ada, "apply this", {})["decision"] == "allow"
    outside = codex_pre(env, ada, "*** Begin Patch\n*** Add File: /tmp/notes.txt\n+x\n*** End Patch\n", {})
    assert outside == {"decision": "allow", "reason": "outside the workspace: not observed"}
    # a file outside beside one inside: the one inside is judged
    mixed = codex_pre(env, ada, "*** Begin Patch\n*** Update File: /tmp/notes.txt\n@@\n-x\n+y\n"
                                "*** Add File: lib/other.py\n+z = 1\n*** End Patch\n", {})
    assert mixed["decision"] == "deny" and "lease_missing:lib/other.py#<file>" in mixed["reason"]
    # the shell heredoc Codex runs as apply_patch, from a folder of the workspace, is judged the same
    heredoc = "cd lib && apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: more.py\n+y = 2\n*** End Patch\nEOF\n"
    shell = env.client.call("hook.event", {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {
        "command": heredoc}, "cwd": WS, "workspace": WS, "harness": "codex", "base": trunk(env), "files": []}, token=ada)
    assert shell["decision"] == "deny" and "lease_missing:lib/more.py#<file>" in shell["reason"]
    events = [e["entry"]["op"]["events"][0] for e in env.client.call("log", {"from": 1}, repo="demo", token=env.token)
              if e["entry"]["op"]["op"] == "observe"]
    assert [(e["tool"], e["decision"], e["paths"]) for e in events] == [
        ("apply_patch", "allow", ["app.py"]), ("apply_patch", "deny", ["app.py", "lib/new.py"]),
        ("apply_patch", "deny", ["app.py"]), ("apply_patch", "deny", ["app.py"]),
        ("apply_patch", "deny", [".lonca/session"]), ("apply_patch", "deny", ["lib/other.py"]),
        ("Bash", "deny", ["lib/more.py"])]


def test_hook_input_reads_each_harness_event_with_its_profile(repo_env):
    env = repo_env
    ada = agent(env, harness="codex")

    def send(harness, raw, **extra):
        return env.client.call("hook.input", {"harness": harness, "input": raw, "workspace": WS, **extra}, token=ada)
    start = send("codex", {"hook_event_name": "SessionStart", "session_id": "x", "source": "startup"})
    assert start["phase"] == "session_start" and start["tool_prefix"] == "mcp__lonca__"
    assert start["context"] == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "{context}"}}
    assert send("codex", {"hook_event_name": "Stop", "stop_hook_active": False}) == {"phase": "stop"}
    assert send("gemini", {"hook_event_name": "AfterAgent"}) == {"phase": "stop"}
    bob = agent(env, "bob")
    acquire(env.client, bob, "app.py#charge", intent="rewrite the pricing")
    pre = {"hook_event_name": "PreToolUse", "cwd": WS, "tool_name": "apply_patch", "tool_input": {"command": (
        "*** Begin Patch\n*** Update File: app.py\n@@\n-    return amount * 2\n+    return amount * 3\n*** End Patch\n")}}
    denied = send("codex", pre, base=trunk(env), files=[{"path": "app.py", "content_b64": b64(APP), "mode": None}])
    assert denied["phase"] == "before_tool" and denied["decision"] == "deny"
    assert denied["output"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "held by bob" in denied["output"]["hookSpecificOutput"]["permissionDecisionReason"]
    # after a tool and at a prompt: the inbox's news once, in the harness's context shape
    me = session(env, ada)["id"]
    env.client.call("negotiate", {"thread": "t", "to_session": me, "message": {"type": "counter", "note": "wait"}},
                    token=bob)
    after = send("codex", {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}})
    assert after["phase"] == "after_tool" and "wait" in after["output"]["hookSpecificOutput"]["additionalContext"]
    assert "output" not in send("codex", {"hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    for harness, raw in [("vim", {"hook_event_name": "Stop"}), ("codex", {"hook_event_name": "Notification"}),
                         ("gemini", {"hook_event_name": "Stop"}), ("codex", {})]:
        with pytest.raises(LoncaError) as e:
            send(harness, raw)
        assert e.value.code == "invalid", (harness, raw)
