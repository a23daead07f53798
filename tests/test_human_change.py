"""A human's own change (seed 001, human.prepare_change, change.propose through human.submit): built
by the daemon, signed unchanged, no lease, the same merge queue and checks, and the lease holders
told. Real worker on a real socket, real git store, real check processes, SQLite and PostgreSQL."""
import json
import subprocess
import time

import pytest

from conftest import git
from helpers import acquire, b64, human_key, init_repo, login, propose
from lonca.protocol import LoncaError
from test_leases import APP
from test_security_key_cli import sk_provider  # noqa: F401 (a fixture: the software authenticator)

PASSING_CHECK = "import sys, pathlib; sys.exit(1 if 'BAD' in pathlib.Path('app.py').read_text() else 0)"


def files(changes: dict) -> list[dict]:
    return [{"path": p, "content_b64": None if t is None else b64(t), "mode": None} for p, t in changes.items()]


def prepare(env, changes: dict, intent: str = "a human's fix", base: str | None = None, **extra) -> dict:
    params = {"base": base or env.trunk, "files": files(changes), "change": None, "author": "Alice",
              "intent": intent, "revert_of": None, **extra}
    return env.client.call("human.prepare_change", params, repo="demo", token=env.token)


def change_of(env, change: str) -> dict:
    return env.client.call("change.get", {"change": change}, repo="demo", token=env.token)


def wait_for(env, change: str, status: str, timeout: float = 30) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = change_of(env, change)
        if got["status"]["status"] == status:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{change} is {got['status']}, not {status}")


def test_a_human_change_lands_through_the_queue_and_its_checks(repo_env):
    env = repo_env
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % PASSING_CHECK)
    before = env.trunk
    prepared = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 4"), "NOTES.md": "# Notes\n"})
    op = prepared["op"]
    assert op["op"] == "change.propose" and op["base"] == before and prepared["syntax_errors"] == []
    assert prepared["facts"]["edits"] == ["app.py#charge"] and prepared["facts"]["added_files"] == ["NOTES.md"]
    assert op["claim"]["intent"] == "a human's fix" and op["claim"]["edits"] == ["app.py#charge"]
    res = env.submit(op)
    assert res["decision"] == {"outcome": "allow", "reasons": []}
    assert res["status"] == "queued" and res["details"] == [] and res["change"] == op["change"]
    got = wait_for(env, op["change"], "integrated")
    assert got["actor"] == {"kind": "human", "name": "alice"} and got["provenance"] == "human"
    assert [e["check"] for e in got["evidence"] if e["result"] == "pass"].count("tests") == 1
    trunk = env.trunk
    assert trunk != before
    blob = env.client.call("blobs", {"commit": trunk, "paths": ["app.py"]}, repo="demo", token=env.token)
    assert "amount * 4" in __import__("base64").b64decode(blob[0]["content_b64"]).decode()
    entry = next(e["entry"] for e in env.log() if e["entry"]["op"]["op"] == "change.propose")
    assert entry["human"]["human"] == "alice" and entry["facts"]["edits"] == ["app.py#charge"]


def test_a_failing_check_rejects_a_human_change(repo_env):
    env = repo_env
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % PASSING_CHECK)
    op = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 2  # BAD")})["op"]
    assert env.submit(op)["decision"]["outcome"] == "allow"
    got = wait_for(env, op["change"], "rejected")
    assert got["status"]["reasons"] == ["verification_failed:tests"]
    assert env.trunk == op["base"]


def test_only_an_op_this_daemon_prepared_and_unchanged_is_taken(repo_env):
    env = repo_env
    op = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 5")})["op"]
    # a commit the daemon never built, and the prepared op with a field changed: both refused
    for forged in ({**op, "commit": "0" * 40}, {**op, "claim": {**op["claim"], "edits": []}},
                   {**op, "claim": {**op["claim"], "intent": "something else"}}):
        with pytest.raises(LoncaError) as e:
            env.submit(forged)
        assert e.value.code == "invalid" and "not prepared by this daemon" in e.value.message
    # a signature over another op: refused, nothing logged
    seq = len(env.log())
    sig = env.human.sign_op("demo", {**op, "change": "k" * 32})
    with pytest.raises(LoncaError) as e:
        env.client.call("human.submit", {"op": op, "sig": sig}, repo="demo", token=env.token)
    assert e.value.code == "denied" and "bad_human_signature" in e.value.message
    assert len(env.log()) == seq
    res = env.submit(op)
    assert res["decision"]["outcome"] == "allow"
    with pytest.raises(LoncaError) as e:  # the same op a second time (a new signature): it was proposed
        env.submit(op)
    assert e.value.code == "invalid" and "already" in e.value.message
    # a claim field the seed's claim does not have, and a missing commit: the edge refuses them
    for bad in ({**op, "claim": {**op["claim"], "extra": 1}}, {k: v for k, v in op.items() if k != "commit"}):
        with pytest.raises(LoncaError) as e:
            env.submit(bad)
        assert e.value.code == "invalid"


def test_prepare_refuses_what_a_proposal_refuses(repo_env):
    env = repo_env
    for changes, why in (({}, "at least one file"), ({"../x": "a"}, ""), ({".git/config": "a"}, "")):
        with pytest.raises(LoncaError) as e:
            prepare(env, changes)
        assert e.value.code == "invalid" and why in e.value.message
    with pytest.raises(LoncaError) as e:
        prepare(env, {"a.py": "x = 1\n"}, base="1" * 40)
    assert e.value.code == "not_found"
    with pytest.raises(LoncaError) as e:
        prepare(env, {"a.py": "x = 1\n"}, revert_of="k" * 32)
    assert e.value.code == "invalid"
    agent = env.agent("writer")["token"]
    with pytest.raises(LoncaError) as e:  # an agent token: the method is a human's
        env.client.call("human.prepare_change", {"base": env.trunk, "files": files({"a.py": "x\n"}), "author": "a",
                                                 "intent": "x"}, token=agent)
    assert e.value.code == "forbidden"


def test_a_human_change_needs_no_lease_and_tells_the_holders(repo_env):
    env = repo_env
    agent = env.agent("alpha")
    held = acquire(env.client, agent["token"], "app.py#charge", intent="rework fees")
    op = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 7")})["op"]
    res = env.submit(op)
    assert res["decision"] == {"outcome": "allow", "reasons": [f"affected_lease:{agent['session']}:{held['set']}"]}
    assert res["details"] == []
    wait_for(env, op["change"], "integrated")
    told = [e for e in env.client.call("events", {"from": 1}, token=agent["token"])["events"]
            if e["kind"] == "symbols_changed"]
    assert told == [{"kind": "symbols_changed", "seq": res["seq"], "change": op["change"], "from": None,
                     "sets": [held["set"]], "symbols": ["app.py#charge"]}]
    inbox = env.client.call("inbox", {}, token=agent["token"])
    assert f"A human's change {op['change']} changes symbols your leases touch: app.py#charge" in inbox["text"]
    # the agent's change on the old base meets the human's in the merge queue, symbol by symbol
    late = propose(env.client, agent["token"], op["base"], {"app.py": APP.replace("amount * 2", "amount + 1")})
    assert late["decision"]["outcome"] == "allow"
    got = wait_for(env, late["change"], "conflicted")
    assert got["integrate_decision"]["reasons"] == ["conflict:app.py#charge"]


def test_policy_decides_a_human_change(repo_env):
    env = repo_env
    env.policy('[review]\ncritical_paths = ["deploy/*"]\n')
    op = prepare(env, {"deploy/prod.toml": "replicas = 3\n"})["op"]
    res = env.submit(op)
    assert res["decision"] == {"outcome": "escalate", "reasons": ["critical_path:deploy/prod.toml"]}
    assert res["status"] == "pending"
    pending = env.status()["pending"]
    assert [(p["change"], p["actor"]) for p in pending] == [(op["change"], "human:alice")]
    env.submit({"op": "approve", "target_seq": res["seq"], "note": None})
    wait_for(env, op["change"], "integrated")
    # policy.cedar is asked on each path of a human's change
    cedar = ('@id("everyone")\npermit(principal, action, resource);\n'
             '@id("no-human-billing")\nforbid(principal is Lonca::Human, action == Lonca::Action::"change.propose",'
             ' resource is Lonca::Path) when { resource.path like "billing/*" };\n')
    pol = env.client.call("human.prepare_policy", {"config": "", "policy": cedar}, repo="demo", token=env.token)["op"]
    assert env.submit(pol)["decision"]["outcome"] == "allow"
    op = prepare(env, {"billing/fee.py": "FEE = 1\n"})["op"]
    res = env.submit(op)
    assert res["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:no-human-billing"]}
    assert res["status"] == "denied"
    assert change_of(env, op["change"])["status"]["status"] == "rejected"
    freeze = {"op": "freeze", "reason": "release"}
    env.submit(freeze)
    op = prepare(env, {"lib/util.py": "def helper():\n    return 43\n"})["op"]
    assert env.submit(op)["decision"]["reasons"] == ["frozen:release"]


def test_a_new_version_of_a_pending_human_change(repo_env):
    env = repo_env
    env.policy('[review]\ncritical_paths = ["deploy/*"]\n')
    first = prepare(env, {"deploy/a.toml": "a = 1\n"})["op"]
    res = env.submit(first)
    second = prepare(env, {"deploy/a.toml": "a = 2\n"}, change=first["change"])["op"]
    assert second["change"] == first["change"] and second["commit"] != first["commit"]
    res2 = env.submit(second)
    assert res2["decision"]["outcome"] == "escalate"
    got = change_of(env, first["change"])
    assert got["version"] == 2 and got["versions"] == [res["seq"], res2["seq"]]
    assert [p["seq"] for p in env.status()["pending"]] == [res2["seq"]]
    # another human can not make a new version of alice's change
    bob = human_key("bob")
    enroll = {"op": "human.enroll", "human": "bob", "key": bob.public}
    env.submit(enroll)
    btoken = login(env.client, bob, "demo")
    with pytest.raises(LoncaError) as e:
        env.client.call("human.prepare_change", {"base": env.trunk, "files": files({"deploy/a.toml": "a = 3\n"}),
                                                 "change": first["change"], "author": "Bob", "intent": "x"},
                        repo="demo", token=btoken)
    assert e.value.code == "invalid"


def test_replay_gives_the_same_state(repo_env):
    env = repo_env
    agent = env.agent("alpha")
    acquire(env.client, agent["token"], "app.py#charge", intent="rework fees")
    op = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 9")})["op"]
    env.submit(op)
    wait_for(env, op["change"], "integrated")
    before = env.status()
    env.client.close()
    env.w.stop()
    env.w.start()
    env.client = env.w.client().connect()
    after = env.client.call("status", repo="demo", token=env.token)
    for key in ("trunk", "changes", "pending", "next_seq"):
        assert after[key] == before[key], key
    assert env.w.cli("audit", "verify").returncode == 0


def test_the_cli_proposes_a_human_change_from_a_checkout(repo_env, tmp_path):
    env = repo_env
    # a human's workspace (`lonca workspace create`: no session in it): the files that differ from its base
    ws = env.w.cli_json("workspace", "create", "--dir", str(tmp_path / "ws"))
    root = tmp_path / "ws"
    (root / "app.py").write_text(APP.replace("amount * 2", "amount * 11"))
    (root / "lib" / "new.py").write_text("def new():\n    return 1\n")
    (root / "README.md").unlink()
    res = env.w.cli("propose", "-m", "tidy up", "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"change", "commit", "seq", "decision", "status", "details"}
    assert out["status"] == "queued" and out["details"] == [] and out["decision"]["outcome"] == "allow"
    got = wait_for(env, out["change"], "integrated")
    assert sorted(got["paths"]) == ["README.md", "app.py", "lib/new.py"] and got["claim"]["intent"] == "tidy up"
    assert got["actor"] == {"kind": "human", "name": "alice"} and got["base"] == ws["base"]
    # a plain git checkout of trunk: its HEAD is the base; nothing changed is a usage error (exit 3)
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(env.w.home / "repos" / "demo.git"), str(checkout)],
                   check=True)
    res = env.w.cli("propose", "-m", "nothing", "--json", cwd=checkout)
    assert res.returncode == 3 and res.stdout == "" and "no local changes" in res.stderr
    # a local commit and an uncommitted file: the base is the newest commit that was trunk
    (checkout / "lib" / "util.py").write_text("def helper():\n    return 41\n")
    git("commit", "-qam", "helper", cwd=checkout)
    (checkout / "lib" / "more.py").write_text("def more():\n    return 2\n")
    res = env.w.cli("propose", "-m", "helper", "--json", cwd=checkout)
    assert res.returncode == 0, res.stderr
    got = wait_for(env, json.loads(res.stdout)["change"], "integrated")
    assert got["paths"] == ["lib/more.py", "lib/util.py"] and got["base"] == git("rev-parse", "HEAD~1", cwd=checkout)
    # on trunk again, a revert of the first change, named by its first letters
    git("fetch", "-q", "origin", cwd=checkout)
    git("reset", "-q", "--hard", "origin/main", cwd=checkout)
    git("clean", "-qfd", cwd=checkout)
    git("checkout", "-q", ws["base"], "--", "app.py", "README.md", cwd=checkout)
    (checkout / "lib" / "new.py").unlink()
    res = env.w.cli("propose", "-m", "undo the tidy-up", "--revert-of", out["change"][:8], "--json", cwd=checkout)
    assert res.returncode == 0, res.stderr
    reverted = change_of(env, json.loads(res.stdout)["change"])
    assert reverted["claim"]["revert_of"] == out["change"] and sorted(reverted["paths"]) == ["README.md", "app.py", "lib/new.py"]
    # a denial exits 1 with the reason on stderr
    env.submit({"op": "freeze", "reason": "release"})
    (checkout / "app.py").write_text(APP.replace("amount * 2", "amount * 12"))
    res = env.w.cli("propose", "-m", "frozen", "--json", cwd=checkout)
    assert res.returncode == 1 and json.loads(res.stdout)["status"] == "denied" and "frozen:release" in res.stderr
    # without a key: a usage error before the worker is asked
    res = env.w.cli("propose", "--human", "nobody", "-m", "x", "--json", cwd=checkout)
    assert res.returncode == 3 and "no usable key" in res.stderr


def test_a_second_repository_on_the_daemon_does_not_take_the_op(repo_env, source_repo):
    env = repo_env
    init_repo(env.client, env.human, "other", import_from=str(source_repo))
    op = prepare(env, {"app.py": APP.replace("amount * 2", "amount * 13")})["op"]
    with pytest.raises(LoncaError) as e:  # signed for demo, sent to other
        env.client.call("human.submit", {"op": op, "sig": env.human.sign_op("demo", op)}, repo="other", token=env.token)
    assert e.value.code in ("denied", "invalid")


def test_presence_required_takes_a_security_key_from_the_cli(repo_env, sk_provider, tmp_path):  # noqa: F811
    """Under [review] presence_required a file key prepares but can not sign a human's change (so
    an agent that reads the human's file key can not pass its work off as theirs); a security key
    through ssh-keygen -Y sign can."""
    env, w = repo_env, repo_env.w
    w.env.update(SSH_SK_PROVIDER=str(sk_provider), LONCA_TEST_SK_COUNTER=str(tmp_path / "sk-counter"))
    w.cli_json("human", "key", "--human", "bob", "--security-key", "ed25519")
    line = w.cli("human", "key", "--human", "bob", check=True).stdout.strip()
    w.cli_json("human", "enrol", "bob", "--public", line, "--repo", "demo")
    env.policy('[review]\npresence_required = true\n')
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(w.home / "repos" / "demo.git"), str(checkout)], check=True)
    (checkout / "lib" / "util.py").write_text("def helper():\n    return 44\n")
    before = env.status()["next_seq"]
    refused = w.cli("propose", "-m", "with a file key", "--json", cwd=checkout)
    assert refused.returncode == 1 and "presence_required" in refused.stderr, refused.stderr
    assert env.status()["next_seq"] == before
    res = w.cli("propose", "--human", "bob", "--repo", "demo", "-m", "with a security key", "--json", cwd=checkout)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    got = wait_for(env, out["change"], "integrated")
    assert got["actor"] == {"kind": "human", "name": "bob"}
    entry = env.log()[out["seq"] - 1]["entry"]
    assert entry["human"]["human"] == "bob" and bytes.fromhex(entry["human"]["sig"]).startswith(b"SSHSIG")


def test_a_change_over_one_line_of_64_kib(repo_env):
    """human.prepare_change and human.submit are methods whose line may pass 64 KiB (seed 001)."""
    env = repo_env
    big = "".join(f"LINE_{i} = {i}\n" for i in range(20_000))  # about 300 KiB
    prepared = prepare(env, {"lib/table.py": big})
    assert prepared["facts"]["added_files"] == ["lib/table.py"] and prepared["facts"]["lines_added"] == 20_000
    assert env.submit(prepared["op"])["decision"]["outcome"] == "allow"
    wait_for(env, prepared["op"]["change"], "integrated")


def test_a_human_workspace_syncs_and_proposes_again(repo_env, tmp_path):
    """The human's loop (issue 14): a workspace of `workspace create`, `lonca propose` as the human,
    integrated; agents move trunk; `lonca sync` with the human's session (trunk.merge is a read);
    propose again on the new base."""
    env, w = repo_env, repo_env.w
    root = tmp_path / "mine"
    created = w.cli_json("workspace", "create", "--dir", str(root))
    (root / "lib" / "util.py").write_text("def helper():\n    return 41\n")
    first = json.loads(w.cli("propose", "-m", "helper 41", "--json", cwd=root, check=True).stdout)
    assert first["status"] == "queued" and first["details"] == []
    assert wait_for(env, first["change"], "integrated")["actor"] == {"kind": "human", "name": "alice"}
    # agents move trunk: one edits a symbol of app.py, another adds a file
    for name, symbol, changes in (("alpha", "app.py#charge", {"app.py": APP.replace("amount * 2", "amount * 6")}),
                                  ("beta", "lib/new.py#<file>", {"lib/new.py": "def new():\n    return 1\n"})):
        agent = env.agent(name)
        acquire(env.client, agent["token"], symbol)
        wait_for(env, propose(env.client, agent["token"], env.trunk, changes)["change"], "integrated")
    # a local edit of another symbol of app.py, made before the sync, is merged symbol by symbol
    (root / "app.py").write_text(APP.replace("charge(1)", "charge(3)"))
    synced = json.loads(w.cli("sync", "--json", cwd=root, check=True).stdout)
    trunk = env.trunk
    assert synced["base_before"] == created["base"] != trunk
    assert synced["base_after"] == trunk and synced["conflicts"] == [] and synced["redacted"] == []
    assert (root / "lib" / "new.py").read_text() == "def new():\n    return 1\n"
    assert (root / "app.py").read_text() == APP.replace("amount * 2", "amount * 6").replace("charge(1)", "charge(3)")
    assert subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout == " M app.py\n"
    second = json.loads(w.cli("propose", "-m", "pay charges 3", "--json", cwd=root, check=True).stdout)
    got = wait_for(env, second["change"], "integrated")
    assert got["base"] == trunk and got["paths"] == ["app.py"] and got["claim"]["edits"] == ["app.py#Client.pay"]
    assert "agent" not in w.cli("sync", "--json", cwd=root, check=True).stderr
    # a plain git checkout is git's to update: sync says so and what makes a workspace
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(w.home / "repos" / "demo.git"), str(checkout)], check=True)
    res = w.cli("sync", "--json", cwd=checkout)
    assert res.returncode == 3 and res.stdout == "" and "lonca workspace create" in res.stderr
