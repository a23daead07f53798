"""A heartbeat after a session's first is answered before its commit (docs/decisions.md, "A
heartbeat answered before its commit"): on a real worker whose database is held by another
writer, so its commit waits, the beat is answered at once, and so is another session's beat that
comes while that commit waits; SIGKILLed before the commit, the restarted worker has lost those
beats and nothing else, the sessions are live on their beats before, and the chain goes on. A
commit that fails loses the beats decided on top of it the same way. A first beat still waits for
its commit."""
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Pending

import pytest

from helpers import demo_sessions, start_session

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
    with worker.client() as c:
        key, htoken, tokens = demo_sessions(c, source_repo, ("a0", "a1"))
        first = [c.call("session.heartbeat", token=t)["now_ms"] for t in tokens]
    return worker, key, htoken, tokens, first


def _two_beats_on_a_waiting_commit(worker, tokens: list[str]) -> list[dict]:
    """The first session's beat, answered as its commit starts to wait for the other writer; then
    the second's, while that commit waits."""
    with ThreadPoolExecutor(1) as pool:
        beats = [pool.submit(_beat, worker, t).result(timeout=ANSWERED_S) for t in tokens]
    assert beats[1]["seq"] == beats[0]["seq"] + 1
    return beats


def _lost(worker, htoken: str, tokens: list[str], first: list[int], beats: list[dict]) -> None:
    """Both beats are gone: each session live on its first beat, the next entry at the first lost seq."""
    with worker.client() as c:
        seen = {s["agent"]: s["last_seen_ms"] for s in c.call("status", repo="demo", token=htoken)["sessions"]}
        assert (seen["a0"], seen["a1"]) == tuple(first)
        assert c.call("session.heartbeat", token=tokens[0])["seq"] == beats[0]["seq"]
    assert worker.cli("audit", "verify").returncode == 0


def test_later_beats_are_answered_before_their_commit_and_a_crash_loses_only_them(beating):
    worker, _, htoken, tokens, first = beating
    con = _held(worker)
    try:
        beats = _two_beats_on_a_waiting_commit(worker, tokens)
        worker.proc.kill()     # before the commit that waits for the other writer
        worker.proc.wait()
    finally:
        con.rollback()
        con.close()
    assert sqlite3.connect(worker.home / "lonca.db").execute(
        "SELECT count(*) FROM log_entries WHERE repo='demo' AND seq>=?", (beats[0]["seq"],)).fetchone() == (0,)
    worker.start()
    _lost(worker, htoken, tokens, first, beats)


def test_beats_decided_on_a_commit_that_fails_are_lost_with_it(beating):
    worker, _, htoken, tokens, first = beating
    con = _held(worker)
    try:
        beats = _two_beats_on_a_waiting_commit(worker, tokens)
        deadline = time.monotonic() + 30    # the commit gives up after the busy timeout; the logs are replayed
        while "the logs were replayed" not in worker.output.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        con.rollback()
        con.close()
    assert "the logs were replayed" in worker.output.read_text()
    _lost(worker, htoken, tokens, first, beats)


def test_a_first_beat_waits_for_its_commit(beating):
    worker, key, htoken, _, _ = beating
    with worker.client() as c:
        token = start_session(c, key, htoken, agent="never beat")["token"]
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
