"""The database failing under a running worker (issue 16, "Faults"): PostgreSQL backends
terminated in the middle of writes, the database refusing connections for a few seconds, a
read-only and a damaged SQLite file. The worker answers promptly meanwhile (`internal` naming the
database; ping goes on), recovers by itself, and its log still verifies."""
import json
import os
import threading
import time

import psycopg
import pytest

from conftest import PG_ADMIN
from helpers import acquire, human_key, login, sqlite_write_locked
from lonca.protocol import LoncaError

PROMPT_S = 5.0  # an answer during an outage comes within this


def _admin(sql: str, *args) -> list:
    with psycopg.connect(PG_ADMIN, autocommit=True) as c:
        cur = c.execute(sql, args)
        return cur.fetchall() if cur.description else []


def _terminate(dbname: str) -> int:
    """Terminate every backend of the test's database (the worker's pool and its lock)."""
    return len(_admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", dbname))


def _write(c, token: str) -> None:
    s = acquire(c, token, "app.py#charge")
    c.call("lease.release", {"set": s["set"]}, token=token)


def _writes_again(c, agent: str, within_s: float) -> None:
    """A write succeeds within the time; until then each one answers `internal`, nothing else."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            _write(c, agent)
            return
        except LoncaError as e:
            assert e.code == "internal" and time.monotonic() < deadline
            time.sleep(0.2)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postgresql_outage_mid_write(repo_env, database_url):
    env, w = repo_env, repo_env.w
    dbname = database_url.rsplit("/", 1)[1]
    env.policy("[sessions]\nops_per_minute = 1000000\n")  # the writes below come as fast as they are answered
    agent = env.agent("a")["token"]
    stop = threading.Event()
    results: list[tuple[str, float]] = []

    def writer():
        c = w.client(timeout=30).connect()
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                _write(c, agent)
                results.append(("ok", time.monotonic() - t0))
            except LoncaError as e:
                results.append((e.code, time.monotonic() - t0))
                time.sleep(0.05)
        c.close()

    th = threading.Thread(target=writer)
    th.start()
    try:
        killed = 0
        for _ in range(6):  # backends killed under a stream of writes
            time.sleep(0.4)
            killed += _terminate(dbname)
        assert killed >= 3
        _admin(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
        try:
            _terminate(dbname)
            time.sleep(0.5)
            c = w.client(timeout=30).connect()
            assert c.call("ping")["daemon_key"]
            t0 = time.monotonic()
            with pytest.raises(LoncaError) as e:
                acquire(c, agent, "lib/util.py#helper")
            assert e.value.code == "internal" and dbname in e.value.message
            assert time.monotonic() - t0 < PROMPT_S
            t0 = time.monotonic()
            try:  # a reader is answered (from durable state, or `internal` while it is replayed)
                c.call("status", repo="demo", token=env.token)
            except LoncaError as e:
                assert e.code == "internal" and dbname in e.message
            assert time.monotonic() - t0 < PROMPT_S
            time.sleep(2.0)
            assert c.call("ping")["daemon_key"]
        finally:
            _admin(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        _writes_again(c, agent, within_s=30)  # back by itself
    finally:
        stop.set()
        th.join(60)
    assert not th.is_alive()
    codes = {code for code, _ in results}
    assert codes <= {"ok", "internal"} and "ok" in codes and "internal" in codes
    assert max(t for _, t in results) < 2 * PROMPT_S
    after = [code for code, _ in results[-3:]]
    _write(c, agent)
    assert w.proc.poll() is None
    assert w.cli("audit", "verify").returncode == 0, after
    out = w.output.read_text()
    assert "failed" in out and "replayed" in out  # the cause and the recovery are logged
    c.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_read_only_database_file_is_refused_at_start(make_worker):
    w = make_worker()
    w.stop()
    db = w.home / "lonca.db"
    os.chmod(db, 0o444)
    try:
        res = w.cli("daemon")
    finally:
        os.chmod(db, 0o644)
    assert res.returncode != 0
    assert "not writable" in res.stderr and str(db) in res.stderr and "Traceback" not in res.stderr + res.stdout


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_write_failure_is_logged_and_the_worker_recovers(repo_env):
    """The database refuses writes for a while (a writer holding its lock past the busy timeout,
    as a backup tool or a read-only remount would): writes answer `internal` with the cause in
    the worker's output, and succeed again once the file can be written."""
    env, w = repo_env, repo_env.w
    agent = env.agent("a")["token"]
    c = w.client(timeout=30).connect()
    _write(c, agent)
    trunk = env.trunk
    read: list = []

    def reader():  # comes while the failing commit waits: woken by its failure, not by a later write
        time.sleep(1.0)
        r = w.client(timeout=30).connect()
        t0 = time.monotonic()
        try:
            read.append(r.call("status", repo="demo", token=env.token)["trunk"])
        except LoncaError as e:
            read.append(e.code)
        read.append(time.monotonic() - t0)
        r.close()
    with sqlite_write_locked(w.home):
        th = threading.Thread(target=reader)
        th.start()
        with pytest.raises(LoncaError) as e:
            _write(c, agent)
        assert e.value.code == "internal" and "lonca.db" in e.value.message and "locked" in e.value.message
        assert c.call("ping")["daemon_key"]
        th.join(30)
        assert read and read[0] in ("internal", trunk) and read[1] < PROMPT_S + 1, read
    _writes_again(c, agent, within_s=20)
    assert "database is locked" in w.output.read_text()
    assert w.cli("audit", "verify").returncode == 0
    c.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_repo_init_whose_commit_fails_leaves_no_store_and_can_be_sent_again(worker, source_repo, monkeypatch):
    """The store of a repo.init is in place while its entry is applied; when the commit fails,
    it goes back to its staging once the replay shows the log does not hold the init, and the
    same signed op succeeds when sent again."""
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    key = human_key("alice")
    c = worker.client(timeout=30).connect()
    prepared = c.call("repo.prepare_init", {"repo": "demo", "human": key.name, "human_key": key.public,
                                            "import_from": str(source_repo)})
    [staging] = (worker.home / "repos" / ".staging").iterdir()
    target = worker.home / "repos" / "demo.git"
    signed = {"op": prepared["op"], "sig": key.sign_op("demo", prepared["op"])}
    with sqlite_write_locked(worker.home):    # the commit fails: locked past its busy timeout
        with pytest.raises(LoncaError) as e:
            c.call("repo.init", signed)
        assert e.value.code == "internal" and "locked" in e.value.message
    deadline = time.monotonic() + 20
    while target.exists():  # put back after the replay
        assert time.monotonic() < deadline, "the store of the failed repo.init was left in place"
        time.sleep(0.1)
    assert staging.is_dir() and not list((worker.home / "repos").glob("*.git"))
    while True:
        try:
            res = c.call("repo.init", signed)
            break
        except LoncaError as e:
            assert e.code == "internal" and time.monotonic() < deadline  # until the writer writes again
            time.sleep(0.2)
    assert res["seq"] == 1 and target.is_dir() and not staging.exists()
    token = login(c, key)
    assert c.call("status", repo="demo", token=token)["trunk"] == prepared["op"]["trunk"]
    assert worker.cli("audit", "verify").returncode == 0
    c.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_damaged_sqlite_file_gives_a_clear_message(repo_env):
    w = repo_env.w
    w.stop()
    db = w.home / "lonca.db"
    raw = bytearray(db.read_bytes())
    page = 4096
    assert len(raw) > 3 * page
    raw[page: len(raw)] = b"\xa5" * (len(raw) - page)  # every page after the first is garbage
    db.write_bytes(bytes(raw))
    for extra in ("-wal", "-shm"):
        (w.home / f"lonca.db{extra}").unlink(missing_ok=True)
    start = w.cli("daemon")
    assert start.returncode != 0
    assert "damaged" in start.stderr and "Traceback" not in start.stderr + start.stdout
    audit = w.cli("audit", "verify")
    assert audit.returncode != 0
    assert "damaged" in audit.stderr + audit.stdout and "Traceback" not in audit.stderr + audit.stdout


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_log_whose_end_was_removed_is_told_by_its_witness(repo_env, database_url):
    """Deleting the last entries leaves a log that verifies; the witness outside the database
    tells it, to the worker's start and to `lonca audit verify`."""
    from sqlalchemy import create_engine, text
    w = repo_env.w
    repo_env.agent("a")
    last = repo_env.log()[-1]
    w.stop()    # the witness follows the commits on its own thread; a stop writes the last one
    witness = json.loads((w.home / "witness" / "demo.json").read_text())
    assert (witness["seq"], witness["hash"], witness["sig"]) == (last["entry"]["seq"], last["hash"], last["sig"])
    engine = create_engine(database_url or f"sqlite:///{w.home / 'lonca.db'}")
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM log_entries WHERE repo = 'demo' AND seq = :s"), {"s": last["entry"]["seq"]})
    engine.dispose()
    audit = w.cli("audit", "verify")
    assert audit.returncode != 0 and "removed from the end of the log" in audit.stdout + audit.stderr
    assert "signed with the log's daemon key" in audit.stdout + audit.stderr
    assert w.cli("audit", "verify", "--witness", str(w.tmp / "none")).returncode == 0  # the chain alone verifies
    res = w.cli("daemon")
    assert res.returncode != 0 and "integrity" in res.stderr and "removed from the end" in res.stderr


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_whose_database_lock_is_taken_stops(worker, database_url):
    """The lock's backend terminated and the lock taken by someone else meanwhile (another
    worker): the worker stops, non-zero, saying why — a supervised task's fatal end."""
    from lonca.service.worker_lock import ADVISORY_KEY
    dbname = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as thief:
        deadline = time.monotonic() + 10
        while not thief.execute("SELECT pg_try_advisory_lock(%s)", (ADVISORY_KEY,)).fetchone()[0]:
            _admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                   "AND application_name = 'lonca worker lock'", dbname)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert worker.proc.wait(20) != 0
    out = worker.output.read_text()
    assert "another worker already runs on the database" in out and "the worker's database lock failed" in out
    assert "sweeper" not in out and "Traceback" not in out  # the lock's end, told once: not the sweeper's
