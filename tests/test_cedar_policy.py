"""policy.cedar on the real worker (issue 14, "Policy"; docs/policy.md, "policy.cedar"): which
humans may approve changes to which paths, which agents may lease and propose which paths; a
policy that does not parse or does not fit Lonca's entities is refused at human.prepare_policy
naming the line; a forbid is a logged deny with policy_forbid:<policy>; a worker that replays the
whole log holds the same decisions and decides the same again."""
import base64
import re
from pathlib import Path

import pytest

from conftest import git_repo
from helpers import RepoEnv, acquire, human_key, init_repo, login, propose
from lonca.protocol import LoncaError
from lonca.service import cedar_policy

CONFIG = '[review]\nagent_changes = "human"\ndistinct_humans = ["bob"]\n'
APP = "def charge(amount):\n    return amount * 3\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"
UTIL = "def helper():\n    return 43\n"
POLICY = """// everyone may do everything, except what the forbids below say
@id("everyone")
permit(principal, action, resource);

@id("billing-owners")
forbid(principal is Lonca::Human, action == Lonca::Action::"approve", resource is Lonca::Path)
when { resource.path like "app*.py" }
unless { principal.person == "alice" };

@id("interns-stay-out-of-lib")
forbid(principal is Lonca::Session,
       action in [Lonca::Action::"lease.acquire", Lonca::Action::"change.propose"],
       resource is Lonca::Path)
when { principal.agent == "intern" && resource.path like "lib/*" };

@id("no-renames")
forbid(principal, action == Lonca::Action::"lease.acquire", resource)
when { context.kind == "rename" };
"""


@pytest.fixture
def env(worker, source_repo, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    return RepoEnv(worker, source_repo)


def set_policy(env: RepoEnv, cedar: str, config: str = CONFIG) -> dict:
    op = env.client.call("human.prepare_policy", {"config": config, "policy": cedar}, repo="demo", token=env.token)["op"]
    return env.submit(op)


def with_bob(env: RepoEnv) -> tuple:
    bob = human_key("bob")
    env.submit({"op": "human.enroll", "human": "bob", "key": bob.public})
    return bob, login(env.client, bob)


def pending(env: RepoEnv, agent: str, files: dict[str, str], symbol: str) -> int:
    a = env.agent(agent)["token"]
    assert acquire(env.client, a, symbol)["decision"]["outcome"] == "allow"
    res = propose(env.client, a, env.trunk, files)
    assert res["decision"]["outcome"] == "escalate", res
    return next(p["seq"] for p in env.status()["pending"] if p["change"] == res["change"])


def replay_whole(env: RepoEnv) -> None:
    """The worker killed (no checkpoint at a stop), started again: it replays the whole log."""
    env.w.proc.kill()
    env.w.proc.wait()
    env.w.start()
    env.client = env.w.client().connect()
    env.token = login(env.client, env.human)


def approve(env: RepoEnv, key, token: str, seq: int) -> dict:
    op = {"op": "approve", "target_seq": seq}
    return env.client.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token)


@pytest.mark.parametrize("cedar, line, words", [
    ('permit(principal, action, resource);\n\nforbid(principal, action, resource)\nwhen { context.kind == "x" &&& };\n',
     "line 4", "invalid token"),
    ('permit(principal, action, resource);\nforbid(principal, action == Lonca::Action::"aprove", resource);\n',
     "line 2", "unrecognized action"),
    ('// owners\npermit(principal, action, resource);\nforbid(principal, action, resource is Lonca::Path)\n'
     'when { resource.pth == "x" };\n', "lines 3-4", "attribute `pth`"),
])
def test_invalid_cedar_is_refused_naming_the_line(env, cedar, line, words):
    before = env.status()
    with pytest.raises(LoncaError) as e:
        set_policy(env, cedar)
    assert e.value.code == "invalid", e.value
    assert e.value.message.startswith(f"policy.cedar {line}: ") and words in e.value.message, e.value.message
    after = env.status()
    assert (after["next_seq"], after["policy"]) == (before["next_seq"], before["policy"])  # nothing written or logged


def test_which_humans_may_approve_which_paths(env):
    assert set_policy(env, POLICY)["decision"]["outcome"] == "allow"
    bob, bob_token = with_bob(env)
    app_seq = pending(env, "a1", {"app.py": APP}, "app.py#charge")
    lib_seq = pending(env, "a2", {"lib/util.py": UTIL}, "lib/util.py#helper")
    denied = approve(env, bob, bob_token, app_seq)
    assert denied["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:billing-owners"]}
    assert any(p["seq"] == app_seq for p in env.status()["pending"])  # a denied approval counts for nothing
    assert approve(env, bob, bob_token, lib_seq)["decision"]["outcome"] == "allow"
    assert approve(env, env.human, env.token, app_seq)["decision"]["outcome"] == "allow"  # alice owns billing
    assert not env.status()["pending"]
    entry = next(e["entry"] for e in env.log() if e["entry"]["seq"] == denied["seq"])
    assert entry["op"] == {"op": "approve", "target_seq": app_seq} and entry["human"]["human"] == "bob"
    assert env.w.cli("audit", "verify").returncode == 0


def test_which_agents_may_lease_and_propose_which_paths(env):
    set_policy(env, POLICY)
    intern, senior = env.agent("intern")["token"], env.agent("senior")["token"]
    out = acquire(env.client, intern, "lib/util.py#helper")
    assert out["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:interns-stay-out-of-lib"]}
    assert acquire(env.client, intern, "app.py#charge")["decision"]["outcome"] == "allow"
    renamed = acquire(env.client, intern, {"symbol": "app.py#Client.pay", "kind": "rename"})
    assert renamed["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:no-renames"]}
    assert acquire(env.client, senior, "lib/util.py#helper")["decision"]["outcome"] == "allow"
    interest = env.client.call("lease.interest", {"items": [{"symbol": "lib/util.py#helper", "kind": "edit"}],
                                                  "intent": "later"}, token=intern)
    assert "policy_forbid:interns-stay-out-of-lib" not in interest["decision"]["reasons"]  # the forbid names acquire and propose
    prop = propose(env.client, intern, env.trunk, {"app.py": APP, "lib/util.py": UTIL})
    assert prop["decision"]["outcome"] == "deny"
    assert "policy_forbid:interns-stay-out-of-lib" in prop["decision"]["reasons"], prop
    assert env.client.call("change.get", {"change": prop["change"]}, token=intern)["status"]["status"] == "rejected"


def test_without_a_permit_cedar_denies_and_policy_update_stays_open(env):
    set_policy(env, '@id("x")\nforbid(principal, action == Lonca::Action::"freeze", resource);\n')
    started = env.agent("a")  # session.start: no permit applies
    assert started["decision"] == {"outcome": "deny", "reasons": ["policy_no_permit"]} and "token" not in started
    assert env.submit({"op": "freeze", "reason": "x"})["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:x"]}
    # policy.update is never policy.cedar's to decide: a policy can not lock its own replacement out
    assert set_policy(env, "permit(principal, action, resource);\n")["decision"]["outcome"] == "allow"
    assert acquire(env.client, env.agent("b")["token"], "app.py#charge")["decision"]["outcome"] == "allow"


def test_a_restarted_worker_replays_and_decides_the_same(env):
    set_policy(env, POLICY)
    bob, bob_token = with_bob(env)
    app_seq = pending(env, "a1", {"app.py": APP}, "app.py#charge")
    first = approve(env, bob, bob_token, app_seq)
    intern = env.agent("intern")["token"]
    lease = acquire(env.client, intern, "lib/util.py#helper")
    log, status = env.log(), env.status()
    replay_whole(env)
    bob_token = login(env.client, bob)
    assert env.log() == log
    again = env.status()
    assert [p["seq"] for p in again["pending"]] == [p["seq"] for p in status["pending"]]
    assert again["policy"] == status["policy"]
    assert approve(env, bob, bob_token, app_seq)["decision"] == first["decision"]
    assert acquire(env.client, intern, "lib/util.py#helper")["decision"] == lease["decision"]
    assert env.w.cli("audit", "verify").returncode == 0


def test_lonca_toml_alone_keeps_policy_cedar_and_an_empty_one_decides_nothing(env):
    set_policy(env, POLICY)
    env.policy(CONFIG + "[leases]\nmax_sets = 8\n")  # as the console's policy form sends it: no policy
    intern = env.agent("intern")["token"]
    assert acquire(env.client, intern, "lib/util.py#helper")["decision"]["reasons"] == ["policy_forbid:interns-stay-out-of-lib"]
    set_policy(env, "// nobody decides here for now\n")
    assert acquire(env.client, intern, "lib/util.py#helper")["decision"]["outcome"] == "allow"


def test_a_forbid_that_fails_to_evaluate_denies(env):
    set_policy(env, 'permit(principal, action, resource);\n@id("overflow")\n'
                    'forbid(principal, action == Lonca::Action::"lease.acquire", resource)\n'
                    'when { context.symbol like "lib/*" && 9223372036854775807 + 1 > 0 };\n')
    a = env.agent("a")["token"]
    assert acquire(env.client, a, "lib/util.py#helper")["decision"] == {"outcome": "deny", "reasons": ["policy_error:overflow"]}
    assert acquire(env.client, a, "app.py#charge")["decision"]["outcome"] == "allow"  # the condition stops before the sum


def test_an_imported_policy_cedar_that_does_not_parse_denies_until_replaced(worker, tmp_path, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    src = git_repo(tmp_path / "imported", {"app.py": APP, "policy.cedar": "permit(principal, action, resource)\n"})
    key, c = human_key("alice"), worker.client().connect()
    prepared = c.call("repo.prepare_init", {"repo": "demo", "human": "alice", "human_key": key.public,
                                            "import_from": str(src), "branch": None})
    assert any(w.startswith("policy.cedar line 1: unexpected end of input") for w in prepared["warnings"]), prepared
    init_repo(c, key, "demo", import_from=str(src))
    env = RepoEnv.__new__(RepoEnv)
    env.w, env.human, env.client, env.token = worker, key, c, login(c, key)
    assert "policy_unreadable" in env.status()["policy_problem"]
    doctor = next(c for c in env.w.cli_json("doctor")["checks"] if c["name"] == "policy demo")
    assert doctor["level"] == "warn" and doctor["hint"] == "send one that parses: lonca policy --cedar FILE", doctor
    assert env.agent("a")["decision"] == {"outcome": "deny", "reasons": ["policy_unreadable"]}
    set_policy(env, "permit(principal, action, resource);\n", config="")
    assert env.status()["policy_problem"] is None
    assert acquire(env.client, env.agent("b")["token"], "app.py#charge")["decision"]["outcome"] == "allow"


def test_the_documented_example_and_entities_are_the_code():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "policy.md").read_text()
    section = doc.split("## policy.cedar", 1)[1]
    cedar = cedar_policy.parse(section.split("```cedar\n", 1)[1].split("```", 1)[0])
    assert set(cedar.names.values()) == {"everyone", "billing-owners", "deploy-presence", "observed-in-src", "no-renames"}
    documented = {m[1]: re.findall(r"`([a-z]+)`", m[2]) for m in re.finditer(r"^\| (`Lonca::\w+`|context) \| (.+) \|$", section, re.M)}
    schema = {f"`Lonca::{name}`" if name != "Context" else "context": sorted(re.findall(r'"(\w+)"', body))
              for name, body in re.findall(r"(?:entity|type) (\w+) = \{(.*?)\};", cedar_policy.SCHEMA)}
    assert {k: sorted(v) for k, v in documented.items()} == schema
    actions = {a for row in re.findall(r"^\| (`[a-z.]+`(?:, `[a-z.]+`)*) \|", section, re.M) for a in re.findall(r"`([a-z.]+)`", row)}
    assert actions == set(cedar_policy.HUMAN_ACTIONS + cedar_policy.PATH_ACTIONS)


def test_a_rejection_policy_cedar_denies_leaves_the_change_waiting(env):
    set_policy(env, 'permit(principal, action, resource);\n@id("keep-billing")\n'
                    'forbid(principal, action == Lonca::Action::"reject", resource is Lonca::Path) when { resource.path == "app.py" };\n')
    seq = pending(env, "a1", {"app.py": APP}, "app.py#charge")
    denied = env.submit({"op": "reject", "target_seq": seq, "reason": "no"})
    assert denied["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:keep-billing"]}
    assert [p["seq"] for p in env.status()["pending"]] == [seq]
    replay_whole(env)  # and so after replay
    assert [p["seq"] for p in env.status()["pending"]] == [seq]


def test_lonca_policy_from_the_cli(env, tmp_path):
    """`lonca policy --cedar FILE` signs with the file key; a file that does not parse exits 1
    with the worker's words; lonca.toml in force is kept."""
    env.policy(CONFIG)
    bad, good = tmp_path / "bad.cedar", tmp_path / "policy.cedar"
    bad.write_text("permit(principal, action, resource);\nforbid(principal, action, resource) when { &&& };\n")
    good.write_text(POLICY)
    res = env.w.cli("policy", "--repo", "demo", "--cedar", str(bad))
    assert res.returncode == 1 and "invalid: policy.cedar line 2: invalid token" in res.stderr, res.stderr
    out = env.w.cli_json("policy", "--repo", "demo", "--cedar", str(good))
    assert out["decision"]["outcome"] == "allow" and out["policy"] == env.status()["policy"]
    assert env.status()["policy_checks"] == [] and env.status()["pending"] == []
    intern = env.agent("intern")["token"]
    assert acquire(env.client, intern, "lib/util.py#helper")["decision"]["reasons"] == ["policy_forbid:interns-stay-out-of-lib"]
    got = env.client.call("blobs", {"commit": out["policy"], "paths": ["lonca.toml"]}, repo="demo", token=env.token)
    assert base64.b64decode(got[0]["content_b64"]).decode() == CONFIG  # lonca.toml in force, kept
    assert env.w.cli("policy", "--repo", "demo").returncode == 3  # neither file: usage


def test_a_comment_is_asked_on_its_own_file(env):
    set_policy(env, 'permit(principal, action, resource);\n@id("quiet-lib")\n'
                    'forbid(principal, action == Lonca::Action::"comment", resource is Lonca::Path) when { resource.path like "lib/*" };\n')
    a = env.agent("a1")["token"]
    acquire(env.client, a, "app.py#charge", "lib/util.py#helper")
    res = propose(env.client, a, env.trunk, {"app.py": APP, "lib/util.py": UTIL})
    seq = next(p["seq"] for p in env.status()["pending"] if p["change"] == res["change"])
    on = {"op": "comment", "target_seq": seq, "line": None, "symbol": None, "text": "why?", "request_changes": False}
    assert env.submit({**on, "path": "app.py"})["decision"]["outcome"] == "allow"
    assert env.submit({**on, "path": "lib/util.py"})["decision"]["reasons"] == ["policy_forbid:quiet-lib"]



def test_a_denied_revocation_ends_no_session_and_says_so(env):
    """A deny keeps none of what the allowing would have done: the agent's token still works, and
    the answer names no ended session."""
    set_policy(env, 'permit(principal, action, resource);\n@id("tokens-stay")\n'
                    'forbid(principal, action == Lonca::Action::"cap.revoke", resource);\n')
    agent = env.agent("a")
    out = env.submit({"op": "cap.revoke", "session": agent["session"], "reason": "leaked?"})
    assert out["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:tokens-stay"]}
    assert out["sessions_ended"] == [], out
    assert env.client.call("status", token=agent["token"])["repo"] == "demo"
