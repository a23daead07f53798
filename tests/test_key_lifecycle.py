"""The key lifecycle over the real socket (issue 14): human.recovery_key, human.rotate,
human.recover (signed by the recovery key, no session), human.revoke and cap.revoke. A key's
sessions end everywhere when it is rotated, recovered or revoked, and the old key is refused
after; each new operation refuses a replayed signature and one made for another repository,
logging nothing; `lonca audit verify` re-checks every entry offline."""
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from helpers import human_key, init_repo, login, start_session
from lonca.humankeys import HumanKey
from lonca.protocol import LoncaError


def fresh(name: str) -> HumanKey:
    return HumanKey(name, Ed25519PrivateKey.generate())


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


class Desk:
    """One client, and a signed human.submit as a given key with a given token."""

    def __init__(self, client):
        self.c = client
        self.any_token = ""  # a session that reads status while others end

    def submit(self, key: HumanKey, token: str | None, op: dict, repo: str = "demo", signed_for: str | None = None) -> dict:
        params = {"op": op, "sig": key.sign_op(signed_for or repo, op)}
        return self.c.call("human.submit", params, repo=repo, token=token)

    def status(self, token: str, repo: str = "demo") -> dict:
        return self.c.call("status", repo=repo, token=token)

    def refused_twice(self, key: HumanKey, token: str | None, op: dict, params: dict, reasons: tuple[str, ...]) -> None:
        """`params` (an accepted submission) sent again, and `op` signed for another repository:
        both denied, nothing logged."""
        self.cross_refused(key, token, op)
        self.replay_refused(token, params, reasons)

    def cross_refused(self, key: HumanKey, token: str | None, op: dict) -> None:
        before = self.status(self.any_token)["next_seq"]
        cross = refusal(lambda: self.submit(key, token, op, signed_for="other"))
        assert cross.code == "denied" and cross.message.startswith("bad_human_signature"), cross
        assert self.status(self.any_token)["next_seq"] == before

    def replay_refused(self, token: str | None, params: dict, reasons: tuple[str, ...]) -> None:
        before = self.status(self.any_token)["next_seq"]
        again = refusal(lambda: self.c.call("human.submit", params, repo="demo", token=token))
        assert again.code == "denied" and again.message.split(":")[0] in reasons, again
        assert self.status(self.any_token)["next_seq"] == before


def submitted(desk: Desk, key: HumanKey, token: str | None, op: dict) -> tuple[dict, dict]:
    params = {"op": op, "sig": key.sign_op("demo", op)}
    return desk.c.call("human.submit", params, repo="demo", token=token), params


def test_enrol_rotate_recover_revoke(worker, source_repo, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    alice, bob = human_key("alice"), human_key("bob")
    desk = Desk(worker.client().connect())
    c = desk.c
    init_repo(c, alice, "demo", import_from=str(source_repo))
    init_repo(c, alice, "other", import_from=str(source_repo))
    cli_token, console_token = login(c, alice), login(c, alice, repo="demo")
    desk.submit(alice, cli_token, {"op": "human.enroll", "human": "bob", "key": bob.public})
    bob_tokens = [login(c, bob), login(c, bob, repo="demo")]
    desk.any_token = bob_tokens[0]
    agent = start_session(c, alice, cli_token)

    # a recovery key, kept offline: status shows its public part
    recovery = fresh("alice")
    op = {"op": "human.recovery_key", "human": "alice", "key": recovery.public}
    _, params = submitted(desk, alice, cli_token, op)
    assert desk.status(cli_token)["humans"]["alice"]["recovery"] == recovery.public["public"]
    desk.refused_twice(alice, cli_token, op, params, ("nonce_reused",))
    theirs = refusal(lambda: desk.submit(bob, bob_tokens[0], {"op": "human.recovery_key", "human": "alice", "key": fresh("x").public}))
    assert theirs.code == "forbidden"

    # rotate: both of alice's sessions end (CLI and console), the old key is refused after
    rotated = fresh("alice")
    op = {"op": "human.rotate", "human": "alice", "key": rotated.public}
    res, params = submitted(desk, alice, cli_token, op)
    assert res["decision"]["outcome"] == "allow" and res["sessions_ended"] == 3  # with the init of "other"'s login
    for token in (cli_token, console_token):
        assert refusal(lambda: desk.status(token)).code == "unauthenticated"
    assert refusal(lambda: login(c, alice, repo="demo")).code == "unauthenticated"
    new_token = login(c, rotated, repo="demo")
    old_sig = refusal(lambda: desk.submit(alice, new_token, {"op": "freeze", "reason": "old key"}))
    assert old_sig.code == "denied" and old_sig.message.startswith("bad_human_signature")
    desk.refused_twice(rotated, new_token, {"op": "human.rotate", "human": "alice", "key": fresh("y").public},
                       params, ("bad_human_signature",))
    assert desk.status(new_token)["humans"]["alice"]["public"] == rotated.public["public"]
    # the agent session the old key started is the agent's, not the key's: it goes on
    assert c.call("status", token=agent["token"])["repo"] == "demo"

    # the rotated key is lost: the recovery key recovers the name with no session at all
    recovered = fresh("alice")
    op = {"op": "human.recover", "human": "alice", "key": recovered.public}
    desk.cross_refused(recovery, None, op)
    res, params = submitted(desk, recovery, None, op)
    assert res["decision"]["outcome"] == "allow" and res["sessions_ended"] == 1
    assert refusal(lambda: desk.status(new_token)).code == "unauthenticated"
    assert refusal(lambda: login(c, rotated, repo="demo")).code == "unauthenticated"
    alice_token = login(c, recovered, repo="demo")
    human = desk.status(alice_token)["humans"]["alice"]
    assert human["public"] == recovered.public["public"] and human["recovery"] is None  # it recovers once
    desk.replay_refused(None, params, ("not_enrolled",))
    again = refusal(lambda: desk.submit(recovery, None, {"op": "human.recover", "human": "alice", "key": fresh("z").public}))
    assert again.code == "denied" and again.message.startswith("not_enrolled")
    nobody = refusal(lambda: desk.submit(bob, None, {"op": "freeze", "reason": "no session"}))
    assert nobody.code == "unauthenticated"
    by_other = refusal(lambda: desk.submit(bob, None, {"op": "human.recover", "human": "alice", "key": fresh("w").public}))
    assert by_other.code == "denied"

    # revoke bob: every session of his key ends, and his key signs nothing here any more
    op = {"op": "human.revoke", "human": "bob", "reason": "laptop stolen"}
    res, params = submitted(desk, recovered, alice_token, op)
    assert res["sessions_ended"] == 2
    for token in bob_tokens:
        assert refusal(lambda: desk.status(token)).code == "unauthenticated"
    assert refusal(lambda: login(c, bob, repo="demo")).code == "unauthenticated"
    assert "bob" not in desk.status(alice_token)["humans"]
    desk.any_token = alice_token
    desk.refused_twice(recovered, alice_token, {"op": "human.revoke", "human": "alice", "reason": "x"}, params,
                       ("nonce_reused",))
    last = refusal(lambda: desk.submit(recovered, alice_token, {"op": "human.revoke", "human": "alice", "reason": "me"}))
    assert last.code == "invalid"  # the only human left: nobody could sign again

    # cap.revoke: the agent's token stops at the entry
    op = {"op": "cap.revoke", "session": agent["session"], "reason": "token leaked"}
    res, params = submitted(desk, recovered, alice_token, op)
    assert res["sessions_ended"] == [agent["session"]]
    assert refusal(lambda: c.call("status", token=agent["token"])).code == "unauthenticated"
    desk.refused_twice(recovered, alice_token, {"op": "cap.revoke", "session": agent["session"], "reason": "y"},
                       params, ("nonce_reused",))

    verified = worker.cli("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # a restart replays the same keys: the recovered key works, the others stay refused
    worker.stop()
    worker.start()
    c = worker.client().connect()
    assert c.call("status", repo="demo", token=login(c, recovered, repo="demo"))["humans"].keys() == {"alice"}
    for key in (alice, rotated, bob):
        assert refusal(lambda: login(c, key, repo="demo")).code == "unauthenticated"


def test_a_submit_without_token_is_unauthenticated_whatever_its_op(worker, source_repo, monkeypatch):
    """Only a human.recover goes without a session; the check reads the op before any schema has."""
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    c = worker.client().connect()
    init_repo(c, human_key("alice"), "demo", import_from=str(source_repo))
    for op in ({"op": ["human.recover"]}, {"op": {"x": 1}}, ["human.recover"], {"op": "freeze", "reason": "x"}):
        e = refusal(lambda: c.call("human.submit", {"op": op, "sig": {}}, repo="demo"))
        assert e.code == "unauthenticated", (op, e)
    # a human.recover of the wrong shape gets through to the schema, which refuses it
    assert refusal(lambda: c.call("human.submit", {"op": {"op": "human.recover"}, "sig": {}}, repo="demo")).code == "invalid"
