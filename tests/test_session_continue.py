"""`lonca session start --continue DIR [--widen]` on a real worker through the CLI (seed 001, "CLI
for runners"): the new session takes the workspace over (files, base, the change in flight), the
old one ends and its token stops; taint, level and what was seen written carry over; leases do
not, but items pinned to a change in flight do. And session.start's scope as the seed shapes it."""
import json
from pathlib import Path

from helpers import acquire, session_op


def cli(w, *args, cwd=None):
    return w.cli(*args, cwd=cwd)


def meta(ws: Path) -> dict:
    return json.loads((ws / ".lonca" / "workspace.json").read_text())


def token_of(ws: Path) -> str:
    return json.loads((ws / ".lonca" / "session").read_text())["token"]


def session(env, sid: str) -> dict:
    return next(s for s in env.status()["sessions"] if s["id"] == sid)


def test_continue_takes_over_the_workspace_and_its_change_in_flight(repo_env, tmp_path):
    env, w = repo_env, repo_env.w
    env.policy('[review]\nagent_changes = "human"\n')     # the change stays in flight, pending
    ws = tmp_path / "ws"
    first = json.loads(cli(w, "session", "start", "--repo", "demo", "--agent", "ada", "--task", "pricing",
                           "--paths", "app.py", "--dir", str(ws), "--json").stdout)
    old, old_token = first["session"], token_of(ws)
    assert first["continues"] is None
    assert cli(w, "lease", "acquire", "app.py#charge", "--intent", "triple the price", "--json", cwd=ws).returncode == 0
    loose = json.loads(cli(w, "lease", "acquire", "app.py#Client", "--intent", "later", "--json", cwd=ws).stdout)
    (ws / "app.py").write_text((ws / "app.py").read_text().replace("amount * 2", "amount * 3"))
    proposed = json.loads(cli(w, "propose", "-m", "triple the price", "--json", cwd=ws).stdout)
    assert proposed["status"] == "pending"
    base = meta(ws)["base"]

    # a scope wider than the old one is refused without --widen, logged, and nothing changes
    wider = cli(w, "session", "start", "--continue", str(ws), "--paths", "**", "--json")
    assert wider.returncode == 1, wider.stderr
    out = json.loads(wider.stdout)
    assert out["decision"] == {"outcome": "deny", "reasons": ["scope_widening:paths"]} and out["continues"] == old
    assert meta(ws)["session"] == old and token_of(ws) == old_token
    assert cli(w, "session", "heartbeat", "--json", cwd=ws).returncode == 0

    res = cli(w, "session", "start", "--continue", str(ws), "--json")
    assert res.returncode == 0, res.stderr
    new = json.loads(res.stdout)
    assert new["continues"] == old and new["workspace"] == str(ws.resolve()) and new["paths"] == ["app.py"]
    assert new["decision"]["outcome"] == "allow"
    assert meta(ws)["session"] == new["session"] and meta(ws)["base"] == base and token_of(ws) != old_token
    assert "amount * 3" in (ws / "app.py").read_text()     # the files stay as they were

    # the old session is over: its token stops working, and status links the two
    with w.client() as c:
        from lonca.protocol import LoncaError
        try:
            c.call("whoami", {}, token=old_token)
            raise AssertionError("the old token still works")
        except LoncaError as e:
            assert e.code == "unauthenticated"
        me = c.call("whoami", {}, token=token_of(ws))
    assert me["session"]["agent"] == "ada" and me["session"]["task"] == "pricing"
    gone, now = session(env, old), session(env, new["session"])
    assert not gone["active"] and gone["continued_by"] == new["session"]
    assert now["active"] and now["continued_from"] == old and now["continued_by"] is None

    # leases do not pass, but the item pinned to the pending change does
    leases = env.status()["leases"]
    assert not any(le["set"] == loose["set"] for le in leases)
    pinned = [le for le in leases if le["session"] == new["session"]]
    assert [p["change"] for le in pinned for p in le["pinned"]] == [proposed["change"]]
    bob = env.agent("bob")
    held = acquire(env.client, bob["token"], "app.py#charge", intent="halve it")
    assert held["decision"]["outcome"] == "deny" and held["details"][0]["holder_session"] == new["session"]

    # the change in flight is the workspace's: a new proposal replaces it
    assert cli(w, "lease", "acquire", "app.py#charge", "--intent", "and round it", "--json", cwd=ws).returncode == 0
    (ws / "app.py").write_text((ws / "app.py").read_text().replace("amount * 3", "round(amount * 3)"))
    again = json.loads(cli(w, "propose", "-m", "triple and round", "--json", cwd=ws).stdout)
    assert f"replaces:{proposed['change']}" in again["decision"]["reasons"]
    change = env.client.call("change.get", {"change": proposed["change"]}, repo="demo", token=env.token)
    assert change["status"] == {"status": "withdrawn"}

    # a session is continued once; a second continuation of it is refused (and logged)
    op = {**session_op("ada"), "scope": gone["scope"], "continues": old}
    assert env.submit(op)["decision"] == {"outcome": "deny", "reasons": ["session_continued"]}

    # the replay of the log at a restart makes the same state
    def kept() -> tuple:
        st = env.status()
        return ([{k: s[k] for k in ("id", "active", "continued_from", "continued_by", "level", "taint")}
                 for s in st["sessions"]], st["leases"])
    before = kept()
    w.stop()
    w.start()
    env.client.close()
    env.client = w.client().connect()
    assert kept() == before


def test_widen_taint_and_level_carry_over_and_what_can_not_be_continued(repo_env, tmp_path):
    env, w = repo_env, repo_env.w
    ws = tmp_path / "ws"
    first = json.loads(cli(w, "session", "start", "--repo", "demo", "--agent", "ada", "--paths", "app.py",
                           "--harness", "claude-code", "--no-setup", "--dir", str(ws), "--json").stdout)
    with w.client() as c:
        tok = token_of(ws)
        c.call("hook.bind", {"harness": "claude-code", "harness_session": "h", "sudo_without_password": False,
                             "workspace": str(ws)}, token=tok)
        c.call("hook.event", {"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/etc/hosts"},
                              "cwd": str(ws), "workspace": str(ws), "harness": "claude-code"}, token=tok)
    before = session(env, first["session"])
    assert before["level"] == "hooks" and before["taint"] == "read_outside:/etc/hosts"

    res = cli(w, "session", "start", "--continue", str(ws), "--paths", "app.py", "lib/**", "--widen", "--json")
    assert res.returncode == 0, res.stderr
    new = json.loads(res.stdout)
    assert new["paths"] == ["app.py", "lib/**"] and new["setup"] is None
    now = session(env, new["session"])
    assert now["harness"] == "claude-code" and now["level"] == "hooks" and now["taint"] == "read_outside:/etc/hosts"
    assert now["bound_ms"] == before["bound_ms"]

    # --widen alone, --continue with --dir, a folder that is no workspace: usage errors, nothing asked
    assert cli(w, "session", "start", "--repo", "demo", "--widen", "--json").returncode == 3
    assert cli(w, "session", "start", "--continue", str(ws), "--dir", str(tmp_path / "x"), "--json").returncode == 3
    assert cli(w, "session", "start", "--continue", str(tmp_path), "--json").returncode == 3

    # a capability's child is its parent's to give: it is not continued
    child = env.client.call("cap.attenuate", {"agent": "helper", "scope": {"paths": ["app.py"]},
                                              "expires_ms": now["expires_ms"] - 1000}, token=token_of(ws))
    op = {**session_op("ada"), "continues": child["session"]}
    assert env.submit(op)["decision"] == {"outcome": "deny", "reasons": ["continue_child_session"]}
    unknown = {**session_op("ada"), "continues": "s-nobody"}
    assert env.submit(unknown)["decision"] == {"outcome": "deny", "reasons": ["unknown_session"]}


def test_session_start_scope_is_required_and_scratch_optional(repo_env, tmp_path):
    from lonca.protocol import LoncaError
    env = repo_env
    no_scope = session_op("ada")
    del no_scope["scope"]
    for op, where in [(no_scope, "params.op.scope is required"),
                      ({**session_op("ada"), "scope": None}, "params.op.scope is required"),
                      ({**session_op("ada"), "scope": {"paths": ["**"], "ops": []}}, "params.op.scope.symbols is required")]:
        try:
            env.submit(op)
            raise AssertionError("accepted")
        except LoncaError as e:
            assert e.code == "invalid" and where in e.message, e.message
    op = session_op("ada")
    del op["scope"]["scratch"]
    res = env.submit(op)
    assert res["decision"]["outcome"] == "allow"
    assert session(env, op["session"])["scope"]["scratch"] == []
    # the log keeps the op as it was signed
    assert next(e for e in env.log() if e["entry"]["op"].get("session") == op["session"])["entry"]["op"]["scope"] == op["scope"]


def test_scratch_is_read_without_taint_kept_by_a_continuation_and_not_added_without_widen(repo_env, tmp_path):
    env, w = repo_env, repo_env.w
    ws, notes, other = tmp_path / "ws", tmp_path / "notes", tmp_path / "other"
    notes.mkdir()
    other.mkdir()
    first = json.loads(cli(w, "session", "start", "--repo", "demo", "--agent", "ada", "--scratch", str(notes),
                           "--harness", "claude-code", "--no-setup", "--dir", str(ws), "--json").stdout)
    assert first["scratch"] == [str(notes.resolve())]
    read = {"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": f"{notes}/plan.md"},
            "cwd": str(ws), "workspace": str(ws), "harness": "claude-code"}
    assert env.client.call("hook.event", read, token=token_of(ws))["decision"] == "allow"
    assert session(env, first["session"])["taint"] is None
    added = cli(w, "session", "start", "--continue", str(ws), "--scratch", str(notes), "--scratch", str(other), "--json")
    assert added.returncode == 1 and json.loads(added.stdout)["decision"]["reasons"] == ["scope_widening:scratch"]
    kept = json.loads(cli(w, "session", "start", "--continue", str(ws), "--json").stdout)
    assert kept["scratch"] == [str(notes.resolve())] and kept["continues"] == first["session"]
