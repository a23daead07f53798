"""Harness profiles in the policy (`[harnesses.<name>] required_level`, `[sessions] required_level`)
on a real worker: a session below the level its harness must stand at escalates
unobserved_session; one that meets it does not; a policy that names a level that does not exist is
refused naming the key, and nothing is stored. A profile of a harness Lonca has none of
(`[harnesses.acme] events`, its tools, setup) makes it known to hook.input, hook.event, mcp.call
and harness.setup."""
import pytest

from helpers import acquire, b64, propose
from lonca.protocol import LoncaError

WS = "/work/ws-of-the-test"
APP_EDIT = ("amount * 2", "amount * 3")


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None       # what is decided, not how it is stored


def bind(env, token: str) -> dict:
    return env.client.call("hook.bind", {"harness": "claude-code", "harness_session": "h",
                                         "sudo_without_password": False, "workspace": WS}, token=token)


def edit_seen(env, token: str, text: str) -> None:
    """The hooks saw a write tool make this edit of app.py (hook.event allowed it)."""
    res = env.client.call("hook.event", {
        "hook_event_name": "PreToolUse", "tool_name": "Edit", "cwd": WS, "workspace": WS, "harness": "claude-code",
        "tool_input": {"file_path": f"{WS}/app.py", "old_string": APP_EDIT[0], "new_string": APP_EDIT[1]},
        "base": env.trunk, "files": [{"path": "app.py", "content_b64": b64(text), "mode": None}]}, token=token)
    assert res["decision"] == "allow", res


def test_a_session_below_its_harness_required_level_escalates_unobserved_session(repo_env):
    env = repo_env
    env.policy('[harnesses.claude-code]\nrequired_level = "hooks"\n')
    app = env.client.call("blobs", {"commit": env.trunk, "paths": ["app.py"]}, repo="demo", token=env.token)[0]
    import base64
    text = base64.b64decode(app["content_b64"]).decode()
    after = {"app.py": text.replace(*APP_EDIT)}

    unbound = env.agent("ada", harness="claude-code")["token"]     # its hooks never bound: unobserved
    acquire(env.client, unbound, "app.py#charge")
    res = propose(env.client, unbound, env.trunk, after)
    assert res["decision"] == {"outcome": "escalate", "reasons": ["unobserved_session"]}
    env.client.call("change.withdraw", {"change": res["change"]}, token=unbound)
    env.client.call("lease.release", {"set": env.status()["leases"][0]["set"]}, token=unbound)

    # a session of another harness (or none) is held to [sessions] required_level: unobserved
    plain = env.agent("cy")["token"]
    acquire(env.client, plain, "lib/util.py#helper")
    res = propose(env.client, plain, env.trunk, {"lib/util.py": "def helper():\n    return 43\n"})
    assert res["decision"]["outcome"] == "allow", res["decision"]

    # bound, and every write seen by its hooks: it meets the profile
    hooked = env.agent("bo", harness="claude-code")["token"]
    assert bind(env, hooked)["level"] == "hooks"
    acquire(env.client, hooked, "app.py#charge")
    edit_seen(env, hooked, text)
    res = propose(env.client, hooked, env.trunk, after)
    assert res["decision"]["outcome"] == "allow", res["decision"]


def test_every_session_is_held_to_sessions_required_level_and_a_bad_level_is_refused(repo_env):
    env = repo_env
    with pytest.raises(LoncaError) as e:
        env.policy('[harnesses.claude-code]\nrequired_level = "watched"\n')
    assert e.value.code == "invalid" and "[harnesses.claude-code] required_level must be" in e.value.message
    env.policy('[sessions]\nrequired_level = "hooks"\n')
    plain = env.agent("cy")["token"]
    acquire(env.client, plain, "lib/util.py#helper")
    res = propose(env.client, plain, env.trunk, {"lib/util.py": "def helper():\n    return 43\n"})
    assert res["decision"] == {"outcome": "escalate", "reasons": ["unobserved_session"]}


ACME = """
[harnesses.acme]
events = { Begin = "session_start", BeforeEdit = "before_tool", AfterEdit = "after_tool", Done = "stop" }
before_tool_mcp = true
tool_prefix = "lonca."
write_tools = { edit_file = "path" }
setup = { hooks = { BeforeEdit = "{lonca_hook}" }, note = "acme reads .acme/hooks.json" }
"""


def test_a_profile_in_the_policy_makes_another_harness_known(repo_env):
    env = repo_env
    app = env.client.call("blobs", {"commit": env.trunk, "paths": ["app.py"]}, repo="demo", token=env.token)[0]
    held = [{"path": "app.py", "content_b64": app["content_b64"], "mode": None}]
    bob = env.agent("bob", harness="claude-code")["token"]
    acquire(env.client, bob, "app.py#charge", intent="rewrite the pricing")
    ada = env.agent("ada", harness="acme")["token"]

    def send(raw: dict, harness: str = "acme", **extra) -> dict:
        return env.client.call("hook.input", {"harness": harness, "input": raw, "workspace": WS, **extra}, token=ada)
    edit = {"hook_event_name": "BeforeEdit", "tool_name": "edit_file", "cwd": WS,
            "tool_input": {"path": "app.py", "old_string": APP_EDIT[0], "new_string": APP_EDIT[1]}}

    # before the policy names acme, Lonca knows nothing of it: its input is invalid, its event denied
    with pytest.raises(LoncaError) as e:
        send(edit, base=env.trunk, files=held)
    assert e.value.code == "invalid" and "no profile for the harness 'acme'" in e.value.message
    assert env.client.call("harness.setup", {"harness": "acme"}, token=ada) == {"setup": None}

    env.policy(ACME)
    start = send({"hook_event_name": "Begin"})
    assert start["phase"] == "session_start" and start["tool_prefix"] == "lonca."
    bound = env.client.call("hook.bind", {"harness": "acme", "harness_session": "a-1", "sudo_without_password": False,
                                          "workspace": WS}, token=ada)
    assert bound["level"] == "hooks", bound
    # an edit of a symbol bob holds, by acme's own write tool and input key: denied, with the holder
    denied = send(edit, base=env.trunk, files=held)
    assert denied["phase"] == "before_tool" and denied["decision"] == "deny", denied
    assert denied["reason"].startswith("Lonca denied this edit (lease_missing:app.py#charge)")
    assert "held by bob" in denied["reason"]
    assert denied["output"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    # a tool acme's profile does not list as a write tool is not judged
    other = dict(edit, tool_name="sed_file")
    assert send(other)["decision"] == "allow"
    # its before-tool event covers the lonca MCP tools: mcp.call finds the event it announced
    assert send(dict(edit, tool_name="lonca.propose", tool_input={}))["decision"] == "allow"
    assert env.client.call("mcp.call", {"tool": "propose"}, token=ada) == {"checked": True, "hooked": True}
    assert send({"hook_event_name": "Done"}) == {"phase": "stop"}
    local = [{"path": "app.py", "entry": {"mode": "100644", "blob": "0" * 40}}]
    stop = env.client.call("hook.stop", {"harness": "acme", "files": local}, token=ada)
    assert stop["unproposed"] == ["app.py"] and stop["output"]["decision"] == "block", stop
    # harness.setup: the policy's setup part as written, holes unfilled; none for the built-in ones
    assert env.client.call("harness.setup", {"harness": "acme"}, token=ada) == {"setup": {
        "hooks": {"BeforeEdit": "{lonca_hook}"}, "note": "acme reads .acme/hooks.json"}}
    assert env.client.call("harness.setup", {"harness": "claude-code"}, token=ada) == {"setup": None}

    # an event acme's profile does not have, and a harness with no profile, are still invalid
    for harness, raw in [("acme", {"hook_event_name": "PreToolUse"}), ("zeta", {"hook_event_name": "Begin"})]:
        with pytest.raises(LoncaError) as e:
            send(raw, harness=harness)
        assert e.value.code == "invalid", (harness, raw)
    assert env.client.call("harness.setup", {"harness": "zeta"}, token=ada) == {"setup": None}
    zeta = env.client.call("hook.event", {"hook_event_name": "PreToolUse", "tool_name": "edit_file", "tool_input": {},
                                          "cwd": WS, "workspace": WS, "harness": "zeta"}, token=ada)
    assert zeta["decision"] == "deny" and "does not know the harness 'zeta'" in zeta["reason"]


def test_a_bad_profile_key_is_refused_naming_it_and_nothing_is_stored(repo_env):
    env = repo_env
    before = env.status()["policy"]
    for text, message in [(ACME.replace("write_tools", "write_tool"), "[harnesses.acme] write_tool is not a setting"),
                          (ACME.replace('"after_tool"', '"after"'), '[harnesses.acme] events."AfterEdit" must be'),
                          (ACME.replace('before_tool_mcp = true\ntool_prefix = "lonca."\n', "before_tool_mcp = true\n"),
                           "[harnesses.acme] tool_prefix is missing")]:
        with pytest.raises(LoncaError) as e:
            env.policy(text)
        assert e.value.code == "invalid" and message in e.value.message, e.value.message
    assert env.status()["policy"] == before
    ada = env.agent("ada", harness="acme")["token"]
    with pytest.raises(LoncaError) as e:
        env.client.call("hook.input", {"harness": "acme", "input": {"hook_event_name": "Begin"}, "workspace": WS},
                        token=ada)
    assert e.value.code == "invalid"
