"""A restored repository whose log is on another daemon's key (issue 14; seed 001, repo.restore
"foreign", daemon.recover): a fresh worker with a key of its own restores a busy repository's
backup as foreign (read, listed by whoami but not repo.list, every write refused foreign_key,
nothing logged), and one of its humans adopts it with a signed daemon.recover through the CLI,
either with their key and a session or with their recovery key and no session (which also
moves their name to a new key). After it `lonca audit verify` passes across the recovery, new
work is signed with this worker's key, a restart replays it, and a missing daemon.key over the
log still refuses to start, naming the key the log now ends on (issue 16). The backed-up worker
runs on SQLite; the restoring one on each database (a restore and the recovery write the log)."""
import os
import shutil
import subprocess
import sys

import pytest

from helpers import acquire, login, propose, session_op, start_session
from lonca.audit import daemon_sig_ok
from lonca.humankeys import load_key
from lonca.protocol import LoncaError
from test_backup_restore import APP, busy_repository, fresh_worker
from test_leases import wait_status


def backed_up(tmp_path, humans: str, recovery_key: bool = False) -> dict:
    """A busy repository on worker a, backed up (and its recovery key set, if asked); a stops."""
    a = fresh_worker(tmp_path, "a", humans)
    try:
        busy = busy_repository(a, tmp_path)
        if recovery_key:
            a.cli_json("human", "recovery-key", "--repo", "demo")
        out = a.cli_json("backup")
        bundle = tmp_path / "carried.bundle"
        shutil.copy(out["path"], bundle)
        busy["client"].close()
        return {**out, "bundle": bundle, "key": busy["key"]}
    finally:
        a.stop()


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


def test_a_foreign_log_waits_and_a_signed_daemon_recover_adopts_it(database_url, tmp_path, monkeypatch):
    humans = str(tmp_path / "humans")
    monkeypatch.setenv("LONCA_HUMANS", humans)
    out = backed_up(tmp_path, humans)
    b = fresh_worker(tmp_path, "b", humans, database_url=database_url)  # a daemon key of its own
    try:
        own = b.client().call("ping")["daemon_key"]
        assert own != out["daemon_key"]
        restored = b.cli_json("restore", "demo", "--from", str(out["bundle"]))
        assert restored["foreign"] is True and restored["daemon_key"] == out["daemon_key"]
        assert restored["seq"] == out["seq"]
        assert b.cli("audit", "verify").returncode == 0

        c = b.client().connect()
        key = out["key"]
        token = login(c, key)
        assert c.call("repo.list", token=token) == [] and c.call("whoami", token=token)["repos"] == ["demo"]
        st = c.call("status", repo="demo", token=token)
        assert st["foreign"] is True and st["daemon_key"] == out["daemon_key"] and st["next_seq"] == out["seq"] + 1
        assert "lonca human recover-daemon-key --repo demo" in b.cli("status", "--repo", "demo", check=True).stdout
        # every write waits for daemon.recover; nothing is logged
        for op in ({"op": "freeze", "reason": "x"}, session_op()):
            e = refusal(lambda: c.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token))
            assert e.code == "foreign_key" and "daemon.recover" in e.message, e
        # a recovery to a key this daemon does not hold, or by nobody enrolled, is refused
        op = {"op": "daemon.recover", "key": out["daemon_key"]}
        e = refusal(lambda: c.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token))
        assert e.code == "invalid" and "does not hold" in e.message
        assert c.call("status", repo="demo", token=token)["next_seq"] == out["seq"] + 1
        c.close()
        b.stop()
        b.start()  # a foreign log replays at start and stays foreign
        c = b.client().connect()
        token = login(c, key)
        assert c.call("status", repo="demo", token=token)["foreign"] is True

        recovered = b.cli_json("human", "recover-daemon-key", "--repo", "demo")
        assert recovered == {"repo": "demo", "human": "alice", "seq": out["seq"] + 1,
                             "decision": {"outcome": "allow", "reasons": []}, "daemon_key": own}
        assert c.call("repo.list", token=token) == ["demo"]
        st = c.call("status", repo="demo", token=token)
        assert st["foreign"] is False and st["daemon_key"] == own
        again = b.cli("human", "recover-daemon-key", "--repo", "demo", "--json")
        assert again.returncode == 1 and "invalid" in again.stderr and "holds" in again.stderr

        # new work: a session, a lease, an integrated change, each entry signed with this key
        agent = start_session(c, key, token)["token"]
        acquire(c, agent, "app.py#refund")
        change = propose(c, agent, st["trunk"], {"app.py": APP.replace("amount * 2", "amount * 3").replace("return x", "return -x")})
        wait_status(c, agent, change["change"], "integrated")
        log = c.call("log", {"from": out["seq"]}, repo="demo", token=token)
        assert log[0]["entry"]["seq"] == out["seq"] and daemon_sig_ok(out["daemon_key"], log[0]["hash"], log[0]["sig"])
        recover_entry = log[1]
        assert recover_entry["entry"]["op"] == {"op": "daemon.recover", "key": own}
        assert recover_entry["entry"]["human"]["human"] == "alice"
        assert len(log) >= 5 and all(daemon_sig_ok(own, e["hash"], e["sig"]) for e in log[1:])
        assert b.cli("audit", "verify").returncode == 0
        c.close()

        b.stop()
        b.start()  # the recovery replays: the log is this daemon's
        c = b.client().connect()
        token = login(c, key)
        assert c.call("status", repo="demo", token=token)["foreign"] is False
        c.close()
        assert b.cli("audit", "verify").returncode == 0

        # issue 16 still holds: no key file over the log refuses to start, naming the key it ends on
        b.stop()
        (b.home / "daemon.key").rename(tmp_path / "kept.key")
        res = subprocess.run([sys.executable, "-m", "lonca", "daemon"], env=b.env, capture_output=True, text=True, timeout=60)
        assert res.returncode != 0 and "integrity" in res.stderr and own in res.stderr, res.stderr
        assert out["daemon_key"] not in res.stderr and not (b.home / "daemon.key").exists()
        (tmp_path / "kept.key").rename(b.home / "daemon.key")
        os.chmod(b.home / "daemon.key", 0o600)
    finally:
        b.stop()


def test_a_recovery_key_adopts_a_foreign_log_without_a_session(database_url, tmp_path, monkeypatch):
    """The machine is lost with alice's key on it: her recovery key signs the daemon.recover, with
    no session, and her name moves to a new file key in the same entry."""
    humans = tmp_path / "humans"
    monkeypatch.setenv("LONCA_HUMANS", str(humans))
    out = backed_up(tmp_path, str(humans), recovery_key=True)
    offline = tmp_path / "usb.key"
    (humans / "alice.recovery.key").rename(offline)
    lost = load_key("alice")
    (humans / "alice.key").unlink()
    (humans / "alice.session").unlink(missing_ok=True)
    b = fresh_worker(tmp_path, "b", str(humans), database_url=database_url)
    try:
        assert b.cli_json("restore", "demo", "--from", str(out["bundle"]))["foreign"] is True
        own = b.client().call("ping")["daemon_key"]
        # another file as the recovery key: refused, no key file made or replaced
        wrong = tmp_path / "wrong.key"
        shutil.copy(offline, wrong)
        from lonca.humankeys import create_key
        create_key("alice", wrong)
        refused = b.cli("human", "recover-daemon-key", "--repo", "demo", "--recovery-key", str(wrong), "--json")
        assert refused.returncode == 1 and "denied: bad_human_signature" in refused.stderr, refused.stderr
        assert not (humans / "alice.key").exists() and not (humans / "alice.key.new").exists()

        recovered = b.cli_json("human", "recover-daemon-key", "--repo", "demo", "--recovery-key", str(offline))
        new = load_key("alice")
        assert recovered["public"] == new.public["public"] != lost.public["public"] and recovered["daemon_key"] == own
        assert recovered["seq"] == out["seq"] + 1 and recovered["decision"]["outcome"] == "allow"
        c = b.client().connect()
        e = refusal(lambda: login(c, lost, repo="demo"))
        assert e.code == "unauthenticated"
        token = login(c, new, repo="demo")
        st = c.call("status", repo="demo", token=token)
        assert st["foreign"] is False and st["humans"]["alice"]["public"] == new.public["public"]
        assert st["humans"]["alice"]["recovery"] is None  # spent
        op = {"op": "freeze", "reason": "recovered; look around first"}
        assert c.call("human.submit", {"op": op, "sig": new.sign_op("demo", op)}, repo="demo", token=token)["decision"]["outcome"] == "allow"
        c.close()
        assert b.cli("audit", "verify").returncode == 0
        b.stop()
        b.start()
        assert b.cli("audit", "verify").returncode == 0
    finally:
        b.stop()
