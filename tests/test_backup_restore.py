"""repo.backup and repo.restore over real workers: a busy repository (a session, a lease, an
integrated change, a policy update, an import) is backed up with `lonca backup`, restored with
`lonca restore` on a fresh worker with another home (the daemon key file carried over, as a
machine's restore does), `lonca audit verify` passes there, what the log names is there (the
change's diff) and a new session works. A bundle of another name, a restored name and a tampered
log are refused; on a daemon with another key the log is foreign. The backed-up worker runs on
SQLite; the restoring one on each database (a restore writes the log table)."""
import json
import shutil
import subprocess

import pygit2
import pytest

from conftest import Worker, git_repo
from helpers import acquire, human_key, init_repo, login, propose, start_session
from lonca.protocol import LoncaError
from test_leases import wait_status

APP = "def charge(amount):\n    return amount * 2\n\n\ndef refund(x):\n    return x\n"


def fresh_worker(tmp_path, name: str, humans: str, key_from=None, database_url: str | None = None) -> Worker:
    """A worker with a home of its own (SQLite, or the database given), on the key file given."""
    w = Worker(tmp_path / name, database_url, {"LONCA_HUMANS": humans})
    (tmp_path / name).mkdir()
    w.home.mkdir(mode=0o700)
    if key_from is not None:
        shutil.copy(key_from, w.home / "daemon.key")
    return w.start()


def busy_repository(w, tmp_path) -> dict:
    dev = git_repo(tmp_path / "dev", {"app.py": APP})
    key = human_key("alice")
    c = w.client().connect()
    init_repo(c, key, "demo", import_from=str(dev))
    token = login(c, key)
    agent = start_session(c, key, token)["token"]
    base = c.call("status", repo="demo", token=token)["trunk"]
    acquire(c, agent, "app.py#charge")
    change = propose(c, agent, base, {"app.py": APP.replace("amount * 2", "amount * 3")})["change"]
    wait_status(c, agent, change, "integrated")
    op = c.call("human.prepare_policy", {"config": "[verification]\nbatch_size = 2\n"}, repo="demo", token=token)["op"]
    c.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token)
    return {"client": c, "token": token, "change": change, "key": key}


def test_backup_and_restore_round_trip(database_url, tmp_path, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", str(tmp_path / "humans"))
    a = fresh_worker(tmp_path, "a", str(tmp_path / "humans"))
    try:
        busy = busy_repository(a, tmp_path)
        c, token = busy["client"], busy["token"]
        before = c.call("status", repo="demo", token=token)
        diff = c.call("change.diff", {"change": busy["change"]}, repo="demo", token=token)
        first = c.call("repo.backup", {}, repo="demo", token=token)  # the second backup's log commit has a parent
        out = a.cli_json("backup")
        assert out["path"] == first["path"]
        assert out["seq"] == before["next_seq"] - 1 and out["head_hash"] == before["head_hash"]
        assert out["daemon_key"] == before["daemon_key"] and out["path"].startswith(str(a.home / "backups"))
        bundle = tmp_path / "carried.bundle"
        shutil.copy(out["path"], bundle)
        heads = subprocess.run(["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True).stdout
        assert "refs/heads/main" in heads and "refs/lonca/log" in heads
        c.close()
    finally:
        a.stop()

    b = fresh_worker(tmp_path, "b", a.env["LONCA_HUMANS"], key_from=a.home / "daemon.key", database_url=database_url)
    try:
        restored = b.cli_json("restore", "demo", "--from", str(bundle))
        assert restored == {"repo": "demo", "seq": out["seq"], "head_hash": out["head_hash"],
                            "daemon_key": out["daemon_key"], "foreign": False, "path": str(b.home / "repos" / "demo.git")}
        assert b.cli("audit", "verify").returncode == 0
        c = b.client().connect()
        key = busy["key"]
        token = login(c, key)
        after = c.call("status", repo="demo", token=token)
        assert (after["trunk"], after["policy"], after["next_seq"]) == (before["trunk"], before["policy"], before["next_seq"])
        assert c.call("change.diff", {"change": busy["change"]}, repo="demo", token=token) == diff
        assert str(pygit2.Repository(restored["path"]).references["refs/heads/main"].target) == before["trunk"]

        # a new session works on the restored repository, and its entries chain on
        agent = start_session(c, key, token)["token"]
        acquire(c, agent, "app.py#refund")
        change = propose(c, agent, after["trunk"], {"app.py": APP.replace("amount * 2", "amount * 3").replace("return x", "return -x")})
        wait_status(c, agent, change["change"], "integrated")
        with pytest.raises(LoncaError) as e:
            c.call("repo.restore", {"repo": "demo", "from": str(bundle)}, token=token)
        assert e.value.code == "conflict"
        with pytest.raises(LoncaError) as e:
            c.call("repo.restore", {"repo": "other", "from": str(bundle)}, token=token)
        assert e.value.code == "invalid" and "'demo'" in e.value.message
        c.close()
        b.stop()
        b.start()  # the restored log replays, its witness agrees
        assert b.cli("audit", "verify").returncode == 0
    finally:
        b.stop()

    # a daemon on another key: the log is not its own, and waits for daemon.recover (test_daemon_recover.py)
    other = fresh_worker(tmp_path, "c", a.env["LONCA_HUMANS"])
    try:
        restored = other.client().call("repo.restore", {"repo": "demo", "from": str(bundle)})
        assert restored["foreign"] is True and restored["daemon_key"] == out["daemon_key"]
    finally:
        other.stop()


def test_restore_refuses_a_log_that_does_not_verify(make_worker, tmp_path, monkeypatch):
    a = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", a.env["LONCA_HUMANS"])
    busy = busy_repository(a, tmp_path)
    path = a.cli_json("backup")["path"]
    busy["client"].close()
    a.stop()
    # a copy of the store whose log has one entry changed: its hash no longer holds
    store = tmp_path / "tampered.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--mirror", path, str(store)], check=True)
    repo = pygit2.Repository(str(store))
    log_commit = repo.references["refs/lonca/log"].peel(pygit2.Commit)
    lines = repo[log_commit.tree["log.jsonl"].id].data.decode().splitlines()
    item = json.loads(lines[2])
    item["entry"]["time_ms"] += 1
    lines[2] = json.dumps(item)
    tb = repo.TreeBuilder()
    tb.insert("log.jsonl", repo.create_blob(("\n".join(lines) + "\n").encode()), pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature("t", "t@example.invalid")
    repo.create_commit("refs/lonca/log", sig, sig, "tampered\n", tb.write(), [log_commit.id])

    b = fresh_worker(tmp_path, "b", a.env["LONCA_HUMANS"], key_from=a.home / "daemon.key")
    try:
        with pytest.raises(LoncaError) as e:
            b.client().call("repo.restore", {"repo": "demo", "from": str(store)})
        assert e.value.code == "integrity" and "seq 3" in e.value.message
        assert not (b.home / "repos" / "demo.git").exists() and not list((b.home / "repos" / ".staging").iterdir())
    finally:
        b.stop()


def test_restore_from_a_remote_lonca_pushed_to(make_worker, tmp_path, monkeypatch):
    """bridge.push carries the log (refs/lonca/log) and the policy commit (refs/lonca/policy):
    the forge's bare repository is enough to restore the repository on a fresh worker."""
    a = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", a.env["LONCA_HUMANS"])
    busy = busy_repository(a, tmp_path)
    c, token = busy["client"], busy["token"]
    forge = tmp_path / "forge.git"
    subprocess.run(["git", "init", "-q", "--bare", str(forge)], check=True)
    pushed = a.cli_json("push", str(forge))
    assert "refs/lonca/log" in pushed["push"] and "refs/lonca/policy" in pushed["push"]
    before = c.call("status", repo="demo", token=token)
    c.close()
    a.stop()

    b = fresh_worker(tmp_path, "b", a.env["LONCA_HUMANS"], key_from=a.home / "daemon.key")
    try:
        restored = b.cli_json("restore", "demo", "--from", str(forge))
        assert restored["seq"] == pushed["seq"] and restored["seq"] == before["next_seq"] - 1  # the push's own entry
        assert b.cli("audit", "verify").returncode == 0
        c = b.client().connect()
        token = login(c, busy["key"])
        after = c.call("status", repo="demo", token=token)
        assert (after["trunk"], after["policy"], after["policy_checks"]) == (before["trunk"], before["policy"], before["policy_checks"])
        c.close()
    finally:
        b.stop()
