"""A logged entry's effects outside the log (a token made usable, the merge queue woken) run once
the entry is durable, never when its commit failed (service/log.py, Draft.after_commit); what a
decision did outside the state is put back when its commit failed, after the replay
(Draft.after_failed_commit). The writer commits to a real SQLite file; the commit fails because
its table is gone."""
import asyncio

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text

from lonca.protocol import LoncaError
from lonca.service.auth import Tokens, token_hash
from lonca.service.daemonkey import DaemonKeys
from lonca.service.log import DAEMON, Draft, LogWriter, allow
from lonca.service.state import State
from lonca.service.store import TokenRow, open_engine

from entries import HUMAN_KEY, TRUNK, Clock


def init_op(key: Ed25519PrivateKey) -> dict:
    return {"op": "repo.init", "repo": "demo", "trunk": TRUNK, "policy": TRUNK, "human": "ada",
            "human_key": HUMAN_KEY, "daemon_key": key.public_key().public_bytes_raw().hex()}


def test_effects_run_after_the_commit_and_never_when_it_fails(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path / 'lonca.db'}")
    key = Ed25519PrivateKey.generate()
    state, tokens, wake = State(), Tokens([]), asyncio.Event()
    replays = []
    put_back: list = []  # whether the state held the repository when each put-back ran

    def replay() -> None:  # the worker replays the durable logs; here the table comes back
        replays.append(1)
        with engine.begin() as c:
            c.execute(text("CREATE TABLE log_entries AS SELECT * FROM log_copy"))
        state.__dict__.update(State().__dict__)

    def draft(token: str, effects_seen: list) -> Draft:
        row = TokenRow(token_hash=token_hash(token), kind="agent", repo="demo", session=token, expires_ms=2**40)
        seen = ("answer", token in {r.session for r in tokens.rows.values()}, wake.is_set())
        effects_seen.append(seen)  # decided: nothing effective yet
        return Draft(actor=DAEMON, op=init_op(key), decision=allow(), rows=[row],
                     result=lambda entry: {"seen_at_answer": effects_seen[-1]},
                     after_commit=[lambda: tokens.add(row), wake.set],
                     after_failed_commit=[lambda: put_back.append(state.repo("demo") is not None)])

    async def run():
        writer = LogWriter(engine, DaemonKeys(tmp_path / "daemon.key", key), state, Clock(), replay, tmp_path)
        writer.start(lambda task: pytest.fail(f"{task} stopped"))
        seen: list = []
        with engine.begin() as c:
            c.execute(text("CREATE TABLE log_copy AS SELECT * FROM log_entries"))
            c.execute(text("DROP TABLE log_entries"))
        with pytest.raises(LoncaError) as failed:
            await writer.append("demo", lambda: draft("lost", seen))
        assert failed.value.code == "internal"
        while writer.broken or not put_back:
            await asyncio.sleep(0.01)
        assert replays and tokens.lookup("lost") is None and not wake.is_set()
        assert put_back == [False]  # after the replay: the state is the log's, without the entry

        answer = await writer.append("demo", lambda: draft("kept", seen))
        assert answer["seq"] == 1 and tokens.lookup("kept") is not None and wake.is_set()
        assert seen == [("answer", False, False)] * 2  # decided and answered before any effect
        assert put_back == [False]  # a commit that succeeds puts nothing back
        await writer.stop()
    asyncio.run(run())
