"""A reviewer's comment (the `comment` op, docs/decisions.md "Review that keeps the reviewer's
state"): signed through human.submit, logged, denied where it names no pending change or a file
the change does not touch, and told to the change's session through events and inbox, once, and
again after a restart (the events are replayed from the log)."""
import pytest

from helpers import RepoEnv, acquire, propose
from lonca.protocol import LoncaError

APP = "def charge(amount):\n    return round(amount * 2)\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


@pytest.fixture
def env(worker, source_repo, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    e = RepoEnv(worker, source_repo)
    e.policy('[review]\nagent_changes = "human"\n')
    yield e
    e.client.close()


def comment(target_seq: int, path: str, text: str, line=None, symbol=None, request_changes=False) -> dict:
    return {"op": "comment", "target_seq": target_seq, "path": path, "line": line, "symbol": symbol, "text": text,
            "request_changes": request_changes}


def test_a_comment_is_signed_logged_and_told_to_the_agent(env, worker):
    agent = env.agent("ada")["token"]
    acquire(env.client, agent, "app.py#charge")
    ch = propose(env.client, agent, env.trunk, {"app.py": APP})
    assert ch["decision"]["outcome"] == "escalate", ch["decision"]

    res = env.submit(comment(ch["seq"], "app.py", "round to cents", line=2, request_changes=True))
    assert res["decision"]["outcome"] == "allow" and res["change"] == ch["change"]
    # what it may not name: a file the change does not touch, an entry that does not wait
    assert env.submit(comment(ch["seq"], "README.md", "and this?"))["decision"]["reasons"] == ["comment_path:README.md"]
    assert env.submit(comment(ch["seq"] + 99, "app.py", "?"))["decision"]["reasons"] == ["not_pending"]
    for bad, field in ((dict(comment(ch["seq"], "app.py", "x"), line=0), "line"),
                       ({k: v for k, v in comment(ch["seq"], "app.py", "x").items() if k != "symbol"}, "symbol")):
        with pytest.raises(LoncaError) as e:
            env.submit(bad)
        assert e.value.code == "invalid" and field in str(e.value)
    with pytest.raises(LoncaError) as e:
        env.submit(comment(ch["seq"], "app.py", "   "))
    assert e.value.code == "invalid" and "the agent reads it" in str(e.value)

    logged = [e["entry"] for e in env.log() if e["entry"]["op"]["op"] == "comment"]
    assert [en["decision"]["outcome"] for en in logged] == ["allow", "deny", "deny"]
    assert logged[0]["human"]["human"] == "alice" and logged[0]["actor"] == {"kind": "human", "name": "alice"}

    told = env.client.call("inbox", {}, token=agent)
    [c] = [e for e in told["events"] if e["kind"] == "comment"]
    assert {k: c[k] for k in ("change", "human", "path", "line", "symbol", "body", "request_changes")} == {
        "change": ch["change"], "human": "alice", "path": "app.py", "line": 2, "symbol": None, "body": "round to cents",
        "request_changes": True}
    assert told["text"].startswith("A human reviewer (human:alice) asks for changes on your change")
    assert [e for e in env.client.call("inbox", {}, token=agent)["events"] if e["kind"] == "comment"] == []
    # the change still waits: asking for changes is not a rejection
    assert [p["seq"] for p in env.status()["pending"]] == [ch["seq"]]

    worker.stop()
    worker.start()
    env.client = worker.client().connect()
    events = env.client.call("events", {"from": None}, token=agent)["events"]
    assert [e["body"] for e in events if e["kind"] == "comment"] == ["round to cents"]
    assert worker.cli("audit", "verify").returncode == 0
