"""The sweeper forgets the tokens of sessions that are over, a few hundred at a time between turns
of the loop (daemon.SWEEP_TURN): with more tokens than one turn holds, every ended session's token
leaves the database and the memory, and the live ones stay usable."""
import sqlite3
import time

import pytest

from helpers import RepoEnv
from lonca.service.daemon import SWEEP_TURN


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None     # the rows are read with sqlite3 below; the deletion itself is the same on both


def test_more_tokens_than_a_turn_are_swept(make_worker, source_repo, monkeypatch):
    w = make_worker({"LONCA_TOKEN_SWEEP_S": "0.2"})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    env = RepoEnv(w, source_repo)
    agents = [env.agent(f"a{i}") for i in range(SWEEP_TURN + 60)]
    ended, live = agents[:SWEEP_TURN + 40], agents[SWEEP_TURN + 40:]
    for a in ended:
        env.client.call("session.end", repo="demo", token=a["token"])

    def agent_rows() -> int:
        with sqlite3.connect(w.home / "lonca.db") as con:
            return con.execute("SELECT count(*) FROM tokens WHERE kind = 'agent'").fetchone()[0]
    deadline = time.monotonic() + 30
    while agent_rows() > len(live) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert agent_rows() == len(live)
    for a in live:
        assert env.client.call("session.heartbeat", repo="demo", token=a["token"])["timeout_ms"] > 0
    env.client.close()
