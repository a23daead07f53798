"""An agent must not be able to approve its own change (issue 14), over the real socket:
[review] presence_required (always on a hardened repository) refuses a file key's approval and
every other human write, so an agent that reads its human's file key can not sign with it; and
approvals toward [review] approvals come from distinct humans: names enrolled by a human count as
that human unless the policy lists them in distinct_humans."""
import json
import os

import pytest

from helpers import Passkey, RepoEnv, acquire, human_key, init_repo, login, propose
from lonca.protocol import LoncaError


@pytest.fixture
def env(worker, source_repo, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    return RepoEnv(worker, source_repo)


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


def submit_as(env: RepoEnv, key, token: str, op: dict, repo: str = "demo") -> dict:
    return env.client.call("human.submit", {"op": op, "sig": key.sign_op(repo, op)}, repo=repo, token=token)


def pending_change(env: RepoEnv) -> tuple[int, str]:
    """An agent's change that waits for humans ([review] agent_changes = "human")."""
    a = env.agent()["token"]
    acquire(env.client, a, "app.py#charge")
    res = propose(env.client, a, env.trunk, {"app.py": "def charge(amount):\n    return amount * 3\n\n\nclass Client:\n"
                                                       "    def pay(self):\n        return charge(1)\n"})
    assert res["decision"]["outcome"] == "escalate", res
    return next(p["seq"] for p in env.status()["pending"] if p["change"] == res["change"]), res["change"]


def test_presence_required_refuses_a_file_key_approval(env):
    env.policy('[review]\nagent_changes = "human"\n')
    seq, change = pending_change(env)  # the agent's session is started before presence is required
    env.policy('[review]\nagent_changes = "human"\npresence_required = true\n')
    assert env.status()["presence_required"] is True
    before = env.status()["next_seq"]
    # what an agent does with the human's file key: log in (allowed: reads) and approve (refused)
    stolen = human_key("alice")
    token = login(env.client, stolen)
    denied = refusal(lambda: submit_as(env, stolen, token, {"op": "approve", "target_seq": seq}))
    assert denied.code == "denied" and denied.message.startswith("presence_required"), denied
    for op in ({"op": "freeze", "reason": "x"}, {"op": "human.enroll", "human": "eve", "key": human_key("eve").public},
               {"op": "policy.update", "policy": env.status()["policy"]}):
        assert refusal(lambda: submit_as(env, stolen, token, op)).message.startswith("presence_required")
    assert env.status()["next_seq"] == before  # nothing logged
    # while nobody holds a key that proves presence, the file key may enrol one (else nothing could be written)
    passkey = Passkey("alice-passkey")
    submit_as(env, stolen, token, {"op": "human.enroll", "human": "alice-passkey", "key": passkey.public})
    # from now on the file key enrols none, not even a passkey of the agent's own
    again = refusal(lambda: submit_as(env, stolen, token, {"op": "human.enroll", "human": "mallory",
                                                            "key": Passkey("mallory").public}))
    assert again.message.startswith("presence_required")
    pk_token = login(env.client, passkey, repo="demo")
    ok = submit_as(env, passkey, pk_token, {"op": "approve", "target_seq": seq})
    assert ok["decision"]["outcome"] == "allow" and ok["change"] == change
    assert env.w.cli("audit", "verify").returncode == 0


def test_a_hardened_repository_always_requires_presence(env, source_repo):
    c, alice = env.client, env.human
    prepared = c.call("repo.prepare_init", {"repo": "hard", "human": "alice", "human_key": alice.public,
                                            "import_from": str(source_repo), "profile": "hardened",
                                            "without_presence": True}, token=env.token)
    c.call("repo.init", {"op": prepared["op"], "sig": alice.sign_op("hard", prepared["op"])}, token=env.token)
    st = c.call("status", repo="hard", token=env.token)
    assert st["profile"] == "hardened" and st["presence_required"] is True
    refused = refusal(lambda: submit_as(env, alice, env.token, {"op": "freeze", "reason": "x"}, repo="hard"))
    assert refused.code == "denied" and refused.message.startswith("presence_required: the hardened profile")


def test_approvals_come_from_distinct_humans(env):
    env.policy('[review]\nagent_changes = "human"\napprovals = 2\n')
    cli, bob = human_key("alice-cli"), human_key("bob")
    env.submit({"op": "human.enroll", "human": "alice-cli", "key": cli.public})  # her own second key
    env.submit({"op": "human.enroll", "human": "bob", "key": bob.public})
    humans = env.status()["humans"]
    assert humans["alice-cli"]["counts_as"] == "alice" and humans["bob"]["counts_as"] == "alice"
    seq, change = pending_change(env)
    assert env.submit({"op": "approve", "target_seq": seq})["decision"]["outcome"] == "allow"
    cli_token, bob_token = login(env.client, cli), login(env.client, bob)
    same = submit_as(env, cli, cli_token, {"op": "approve", "target_seq": seq})
    assert same["decision"] == {"outcome": "deny", "reasons": ["same_human:alice"]}
    pending = next(p for p in env.status()["pending"] if p["seq"] == seq)
    assert pending["approvals"] == ["alice"] and pending["required"] == 2
    assert submit_as(env, bob, bob_token, {"op": "approve", "target_seq": seq})["decision"]["reasons"] == ["same_human:alice"]
    # the humans say bob is a person of his own: his approval is the second
    env.policy('[review]\nagent_changes = "human"\napprovals = 2\ndistinct_humans = ["bob"]\n')
    assert env.status()["humans"]["bob"]["counts_as"] == "bob"
    ok = submit_as(env, bob, bob_token, {"op": "approve", "target_seq": seq})
    assert ok["decision"]["outcome"] == "allow"
    assert all(p["seq"] != seq for p in env.status()["pending"])
    got = env.client.call("change.get", {"change": change}, token=env.token, repo="demo")
    assert got["status"]["status"] in ("queued", "integrated")
    assert env.w.cli("audit", "verify").returncode == 0
    # lineage is per repository: in one bob makes, bob is a human of his own
    init_repo(env.client, bob, "bobs")
    assert env.client.call("status", repo="bobs", token=login(env.client, bob))["humans"]["bob"]["counts_as"] == "bob"


def test_doctor_warns_when_agents_of_this_user_could_use_the_file_key(env):
    def presence_check() -> dict:
        res = env.w.cli("doctor", "--json")
        return next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "presence demo")

    assert presence_check()["level"] == "pass"  # no agent has connected yet
    agent = env.agent()["token"]
    env.client.call("status", token=agent)  # an agent's request, from this user
    assert env.status()["agent_uids"] == [os.getuid()]
    warned = presence_check()
    assert warned["level"] == "warn" and "another user" in warned["hint"] and "alice.key" in warned["detail"]
    env.policy('[review]\npresence_required = true\n')
    assert presence_check()["level"] == "pass"
