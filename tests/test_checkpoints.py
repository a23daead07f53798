"""A worker restarts from its state checkpoint and checks the chain after it: a clean stop saves
one, the next start replays nothing before it, a checkpoint that does not match the log is
ignored, and a changed entry after the checkpoint still stops the start (`integrity`)."""
import pytest
from sqlalchemy import create_engine, text

from helpers import demo_sessions


def db_url(worker) -> str:
    return worker.env.get("LONCA_DATABASE_URL") or f"sqlite:///{worker.home / 'lonca.db'}"


def sql(worker, query: str, **params):
    engine = create_engine(db_url(worker))
    try:
        with engine.begin() as conn:
            res = conn.execute(text(query), params)
            return res.all() if res.returns_rows else None
    finally:
        engine.dispose()


@pytest.fixture
def busy(make_worker, monkeypatch, source_repo):
    """A worker with a repository, a session that beat and holds a lease: (worker, tokens, status)."""
    worker = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    with worker.client() as c:
        _, htoken, (token,) = demo_sessions(c, source_repo)
        c.call("session.heartbeat", token=token)
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "work", "ttl_ms": 600_000}, token=token)
        before = c.call("status", repo="demo", token=htoken)
    return worker, htoken, token, before


def test_a_clean_stop_saves_a_checkpoint_the_start_resumes_from(busy):
    worker, htoken, token, before = busy
    worker.stop()
    (seq, h), = sql(worker, "SELECT seq, hash FROM checkpoints WHERE repo='demo'")
    assert seq == before["next_seq"] - 1 and h == before["head_hash"]
    worker.start()
    with worker.client() as c:
        after = c.call("status", repo="demo", token=htoken)
        for k in ("trunk", "next_seq", "head_hash", "humans", "sessions", "leases"):
            assert after[k] == before[k], k
        c.call("session.heartbeat", token=token)  # and the chain goes on from it
    assert worker.cli("audit", "verify").returncode == 0


def test_a_checkpoint_that_does_not_cover_the_log_is_replayed_over(busy):
    worker, htoken, _, before = busy
    worker.stop()
    sql(worker, "UPDATE checkpoints SET hash=:h WHERE repo='demo'", h="0" * 64)
    worker.start()
    with worker.client() as c:
        after = c.call("status", repo="demo", token=htoken)
    assert (after["next_seq"], after["head_hash"], after["leases"]) == (before["next_seq"], before["head_hash"], before["leases"])
    assert "does not match the log; replaying it whole" in worker.output.read_text()


def test_a_changed_entry_after_the_checkpoint_stops_the_start(busy):
    worker, _, token, before = busy
    worker.stop()  # checkpoint at next_seq - 1
    worker.start()
    with worker.client() as c:   # answered once durable (a heartbeat after the first may not be)
        seq = c.call("lease.acquire", {"set": None, "items": [{"symbol": "lib/util.py#helper", "kind": "edit"}],
                                       "intent": "more", "ttl_ms": 600_000}, token=token)["seq"]
    worker.proc.kill()  # no clean stop: the entry at seq is after the checkpoint
    worker.proc.wait()
    (entry,), = sql(worker, "SELECT entry FROM log_entries WHERE repo='demo' AND seq=:s", s=seq)
    changed = entry.replace('"more"', '"morE"')
    assert changed != entry and seq == before["next_seq"]
    sql(worker, "UPDATE log_entries SET entry=:e WHERE repo='demo' AND seq=:s", e=changed, s=seq)
    with pytest.raises(RuntimeError, match="integrity|does not verify"):
        worker.start()
