"""A heartbeat after a session's first is answered before its commit (docs/decisions.md, "A
heartbeat answered before its commit"): on a real worker whose database is held by another
writer, so its commit waits, the beat is answered at once; SIGKILLed before the commit, the
restarted worker has lost that beat and nothing else, the session is live on its beat before,
and the chain goes on. A first beat still waits for its commit."""
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Pending

import pytest

from helpers import human_key, init_repo, login, start_session

ANSWERED_S = 2.0   # well under the database's busy timeout (5 s), which the commit waits through


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def _held(worker) -> sqlite3.Connection:
    """Another writer on the worker's database: its commits wait until this one ends."""
    con = sqlite3.connect(worker.home / "lonca.db", isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    return con


def _beat(worker, token: str) -> dict:
    with worker.client() as c:
        return c.call("session.heartbeat", token=token)


@pytest.fixture
def beating(make_worker, monkeypatch, source_repo):
    worker = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    key = human_key("alice")
    with worker.client() as c:
        init_repo(c, key, "demo", import_from=str(source_repo))
        htoken = login(c, key)
        token = start_session(c, key, htoken)["token"]
        first = c.call("session.heartbeat", token=token)
    return worker, key, htoken, token, first


def test_a_later_beat_is_answered_before_its_commit_and_a_crash_loses_only_it(beating):
    worker, _, htoken, token, first = beating
    con = _held(worker)
    pool = ThreadPoolExecutor(1)
    try:
        beat = pool.submit(_beat, worker, token).result(timeout=ANSWERED_S)
        assert beat["seq"] == first["seq"] + 1 and beat["now_ms"] >= first["now_ms"]
        worker.proc.kill()     # before the commit that waits for the other writer
        worker.proc.wait()
    finally:
        con.rollback()
        con.close()
        pool.shutdown()
    assert sqlite3.connect(worker.home / "lonca.db").execute(
        "SELECT count(*) FROM log_entries WHERE repo='demo' AND seq>=?", (beat["seq"],)).fetchone() == (0,)
    worker.start()
    with worker.client() as c:
        session, = c.call("status", repo="demo", token=htoken)["sessions"]
        assert session["active"] and session["last_seen_ms"] == first["now_ms"]
        again = c.call("session.heartbeat", token=token)
    assert again["seq"] == beat["seq"]     # the lost beat's seq is the next entry's
    assert worker.cli("audit", "verify").returncode == 0


def test_a_first_beat_waits_for_its_commit(beating):
    worker, key, htoken, _, _ = beating
    with worker.client() as c:
        token = start_session(c, key, htoken, agent="second")["token"]
    con = _held(worker)
    pool = ThreadPoolExecutor(1)
    try:
        beat = pool.submit(_beat, worker, token)
        with pytest.raises(Pending):
            beat.result(timeout=ANSWERED_S)
    finally:
        con.rollback()
        con.close()
    assert beat.result(timeout=30)["seq"] > 0     # committed once the other writer let go
    pool.shutdown()
