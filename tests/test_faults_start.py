"""Operator mistakes at start (issue 16, "Faults"): a second worker on one home or one database,
a missing daemon.key over an existing log, a stale lock of trunk's ref, the socket's folder and
a home open to others. Each is refused with a clear message or repaired, never made worse."""
import os
import stat
import subprocess
import sys
import time

import pygit2
import pytest

from conftest import Worker
from helpers import acquire, propose
from test_leases import APP, wait_status


def _refused(w: Worker, timeout: float = 60) -> subprocess.CompletedProcess:
    """Start `w` expecting it to refuse: it must exit by itself, non-zero."""
    res = subprocess.run([sys.executable, "-m", "lonca", "daemon"], env=w.env, cwd=w.tmp,
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return res


def _store(w: Worker) -> pygit2.Repository:
    return pygit2.Repository(str(w.home / "repos" / "demo.git"))


def test_a_second_worker_on_the_same_home_refuses(worker):
    res = _refused(Worker(worker.tmp, worker.env.get("LONCA_DATABASE_URL")))
    assert "busy: another worker" in res.stderr and str(worker.home) in res.stderr
    c = worker.client().connect()
    assert c.call("ping")["daemon_key"]  # the first one still serves its socket
    c.close()


def test_a_second_worker_on_the_same_database_refuses(worker, tmp_path, database_url):
    other = tmp_path / "other"
    other.mkdir()
    if database_url is None:  # SQLite: a database outside both homes
        worker.stop()
        shared = f"sqlite:///{tmp_path / 'shared.db'}"
        first = Worker(tmp_path / "first", shared)
        (tmp_path / "first").mkdir()
        first.start()
        second = Worker(other, shared)
    else:
        first = worker
        second = Worker(other, database_url)
    try:
        res = _refused(second)
        assert "busy: another worker" in res.stderr and "database" in res.stderr
        assert not (other / "home" / "lonca.sock").exists()
        c = first.client().connect()
        assert c.call("ping")["daemon_key"]
        c.close()
    finally:
        first.stop()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_socket_another_worker_serves_is_never_taken_or_deleted(worker, tmp_path):
    """A second worker with its own home and database but the first one's socket."""
    (tmp_path / "second").mkdir()
    second = Worker(tmp_path / "second", None, {"LONCA_SOCKET": str(worker.socket)})
    res = _refused(second)
    assert f"another worker serves {worker.socket}" in res.stderr
    assert worker.socket.is_socket()
    c = worker.client().connect()
    assert c.call("ping")["daemon_key"]
    c.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_missing_daemon_key_over_a_log_is_refused(repo_env):
    w = repo_env.w
    public = repo_env.client.call("ping")["daemon_key"]
    w.stop()
    key = w.home / "daemon.key"
    saved = key.read_bytes()
    key.unlink()
    res = _refused(w)
    assert "integrity" in res.stderr and public in res.stderr and str(key) in res.stderr and "demo" in res.stderr
    assert not key.exists()  # no new key was made
    key.write_bytes(saved)
    os.chmod(key, 0o600)
    w.start()
    assert w.cli("audit", "verify").returncode == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_stale_lock_of_trunk_is_cleared_at_start(repo_env):
    w, env = repo_env.w, repo_env
    a = env.agent()["token"]
    acquire(env.client, a, "app.py#charge")
    res = propose(env.client, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 5")})
    merged = wait_status(env.client, a, res["change"], "integrated")["status"]["commit"]
    w.stop()
    # killed during the ref update: the ref is behind the log and its lock is left behind
    store = _store(w)
    store.references.create("refs/heads/main", store[merged].parents[0].id, force=True)
    lock = w.home / "repos" / "demo.git" / "refs" / "heads" / "main.lock"
    lock.write_text(merged + "\n")
    past = time.time() - 60
    os.utime(lock, (past, past))
    w.start()
    assert not lock.exists()
    assert str(_store(w).references["refs/heads/main"].target) == merged
    assert "removed a stale lock" in w.output.read_text()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def _trunk_ref_reaches(w, commit: str, timeout_s: float = 10) -> bool:
    """Whether trunk's ref names `commit` within the time: it moves once the entry is durable,
    a moment after the change reads integrated."""
    end = time.time() + timeout_s
    while str(_store(w).references["refs/heads/main"].target) != commit:
        if time.time() > end:
            return False
        time.sleep(0.05)
    return True


def test_trunk_moves_or_the_integration_waits_while_its_lock_is_held(repo_env):
    w, env = repo_env.w, repo_env
    c = env.client
    a = env.agent()["token"]
    lock = w.home / "repos" / "demo.git" / "refs" / "heads" / "main.lock"
    held = open(lock, "w")  # a live process holds the lock: nothing may be acknowledged
    try:
        acquire(c, a, "app.py#charge")
        res = propose(c, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 6")})
        time.sleep(4.5)  # two wakes of the queue
        assert c.call("change.get", {"change": res["change"]}, token=a)["status"]["status"] == "queued"
    finally:
        held.close()
    past = time.time() - 60  # its holder died: the lock is stale now
    os.utime(lock, (past, past))
    got = wait_status(c, a, res["change"], "integrated", timeout=20)
    assert _trunk_ref_reaches(w, got["status"]["commit"]) and got["status"]["commit"] == env.trunk
    # a lock left behind between two integrations does not stop the next one either
    lock.write_text("x\n")
    os.utime(lock, (past, past))
    res2 = propose(c, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 8")})
    got2 = wait_status(c, a, res2["change"], "integrated", timeout=20)
    assert _trunk_ref_reaches(w, got2["status"]["commit"])
    assert w.cli("audit", "verify").returncode == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_socket_folder_is_changed_only_when_the_worker_made_it(tmp_path, make_worker):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a shared /tmp
    w = make_worker({"LONCA_SOCKET": str(shared / "lonca.sock")})
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(w.socket.stat().st_mode) == 0o600
    w.stop()
    made = tmp_path / "run" / "lonca"
    w2 = Worker(tmp_path, None, {"LONCA_SOCKET": str(made / "lonca.sock")})
    w2.start()
    try:
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
        assert stat.S_IMODE((w2.home).stat().st_mode) == 0o700
    finally:
        w2.stop()


def test_a_home_open_to_others_that_holds_the_database_is_refused(tmp_path):
    w = Worker(tmp_path, None)
    w.home.mkdir()
    os.chmod(w.home, 0o755)
    res = _refused(w)
    assert "forbidden" in res.stderr and "chmod 700" in res.stderr
    assert stat.S_IMODE(w.home.stat().st_mode) == 0o755  # not changed behind the operator's back
    assert not (w.home / "lonca.db").exists()
