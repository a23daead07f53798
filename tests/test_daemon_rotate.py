"""The daemon's key rotates (issue 14): daemon.prepare_rotate makes the next key (ping's next_key),
a signed daemon.rotate moves one repository's log to it, and once none is left on the old key the
next one replaces it, key file included. Entries after a rotation are signed with the new key,
a replayed or cross-repository rotation is refused, and `lonca audit verify` follows the change
offline, before and after a restart. Over the real socket."""
import pytest

from helpers import human_key, init_repo, login
from lonca.audit import daemon_sig_ok
from lonca.protocol import LoncaError
from lonca.service.daemonkey import load_or_create, public_hex


@pytest.fixture
def database_url():
    return None  # the log's keys are tested; the store tests run both databases


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


def test_rotate_the_daemon_key_repository_by_repository(worker, source_repo, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    alice = human_key("alice")
    c = worker.client().connect()
    for repo in ("demo", "other"):
        init_repo(c, alice, repo, import_from=str(source_repo))
    token = login(c, alice)
    old = c.call("ping")["daemon_key"]
    assert c.call("ping")["next_key"] is None

    def submit(op: dict, repo: str, signed_for: str | None = None) -> dict:
        return c.call("human.submit", {"op": op, "sig": alice.sign_op(signed_for or repo, op)}, repo=repo, token=token)

    prepared = c.call("daemon.prepare_rotate", token=token)
    new = prepared["key"]
    assert prepared["repos"] == ["demo", "other"] and new != old
    assert c.call("daemon.prepare_rotate", token=token)["key"] == new  # one next key per rotation
    assert c.call("ping")["next_key"] == new

    unknown = refusal(lambda: submit({"op": "daemon.rotate", "key": "ab" * 32}, "demo"))
    assert unknown.code == "invalid" and "does not hold" in unknown.message
    op = {"op": "daemon.rotate", "key": new}
    cross = refusal(lambda: submit(op, "demo", signed_for="other"))
    assert cross.code == "denied" and cross.message.startswith("bad_human_signature")
    params = {"op": op, "sig": alice.sign_op("demo", op)}
    c.call("human.submit", params, repo="demo", token=token)
    replay = refusal(lambda: c.call("human.submit", params, repo="demo", token=token))
    assert replay.code == "denied" and replay.message.startswith("nonce_reused")
    assert c.call("status", repo="demo", token=token)["daemon_key"] == new
    assert c.call("daemon.prepare_rotate", token=token)["repos"] == ["other"]

    # the rotation's entry is signed with the old key, the ones after it with the new
    submit({"op": "freeze", "reason": "after the rotation"}, "demo")
    entries = c.call("log", {"from": 1}, repo="demo", token=token)
    rotated, after = entries[-2], entries[-1]
    assert rotated["entry"]["op"]["op"] == "daemon.rotate" and daemon_sig_ok(old, rotated["hash"], rotated["sig"])
    assert daemon_sig_ok(new, after["hash"], after["sig"]) and not daemon_sig_ok(old, after["hash"], after["sig"])
    assert c.call("ping")["daemon_key"] == old  # other is still on it

    moved = worker.cli_json("human", "rotate-daemon-key")  # the CLI moves what is left: other
    assert [m["repo"] for m in moved["repos"]] == ["other"] and moved["next_key"] is None
    pong = c.call("ping")
    assert pong["daemon_key"] == new and pong["next_key"] is None
    key_file = worker.home / "daemon.key"
    assert public_hex(load_or_create(key_file, {})) == new and not (worker.home / "daemon.next.key").exists()
    verified = worker.cli("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr

    worker.stop()
    worker.start()
    c = worker.client().connect()
    token = login(c, alice)
    assert c.call("ping")["daemon_key"] == new
    submit({"op": "unfreeze", "reason": "after the restart"}, "demo")
    last = c.call("log", {"from": 1}, repo="demo", token=token)[-1]
    assert daemon_sig_ok(new, last["hash"], last["sig"])
    assert worker.cli("audit", "verify").returncode == 0
