"""Harness profiles in the policy (`[harnesses.<name>] required_level`, `[sessions] required_level`)
on a real worker: a session below the level its harness must stand at escalates
unobserved_session; one that meets it does not; a policy that names a level that does not exist is
refused naming the key, and nothing is stored."""
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
