"""A quick entry (a heartbeat) is not held behind a long batch (service/log.py, `quick`): queued
while the writer decides 200 slow entries, it is decided at the writer's next turn and committed
with that batch, not after it with the next; queued with them before the batch starts, it is
decided first. The writer commits to a real SQLite file."""
import asyncio
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.service.daemonkey import DaemonKeys
from lonca.service.log import DAEMON, Draft, LogWriter, allow
from lonca.service.state import State
from lonca.service.store import open_engine

from entries import Clock, agent
from test_after_commit import init_op

SLOW = 200
SLOW_S = 0.001  # each slow decision's CPU: a proposal's decide is 0.3-1 ms


def start_op(session: str, clock: Clock) -> dict:
    return {"op": "session.start", "session": session, "agent": f"agent-{session}", "model": None, "task": None,
            "scope": {"paths": ["**"]}, "expires_ms": clock() + 3_600_000}


def beat(session: str, slow: bool, decided: list) -> Draft:
    if slow:
        end = time.perf_counter() + SLOW_S
        while time.perf_counter() < end:
            pass
    decided.append("slow" if slow else "quick")
    return Draft(actor=agent(session), op={"op": "observe", "session": session, "events": [{"kind": "heartbeat"}]},
                 decision=allow())


async def setup(tmp_path, clock: Clock) -> LogWriter:
    """A writer on a real SQLite file, its log holding a repository and the session s1."""
    engine = open_engine(f"sqlite:///{tmp_path / 'lonca.db'}")
    key = Ed25519PrivateKey.generate()
    writer = LogWriter(engine, DaemonKeys(tmp_path / "daemon.key", key), State(), clock, lambda: None, tmp_path)
    writer.start(lambda task: pytest.fail(f"{task} stopped"))
    await writer.append("demo", lambda: Draft(actor=DAEMON, op=init_op(key), decision=allow()))
    await writer.append("demo", lambda: Draft(actor={"kind": "human", "name": "ada"}, op=start_op("s1", clock),
                                              decision=allow()))
    return writer


def test_a_quick_entry_queued_during_a_long_batch_joins_it(tmp_path):
    clock = Clock()

    async def run():
        writer = await setup(tmp_path, clock)
        decided: list[str] = []
        slow = [asyncio.ensure_future(writer.append("demo", lambda: beat("s1", True, decided))) for _ in range(SLOW)]
        while len(decided) < 5:     # the batch is being decided
            await asyncio.sleep(0)
        quick = await writer.append("demo", lambda: beat("s1", False, decided), quick=True)
        after = decided.index("quick")
        seqs = [answer["seq"] for answer in await asyncio.gather(*slow)]
        await writer.stop()
        return quick, after, seqs

    quick, after, seqs = asyncio.run(run())
    assert after < SLOW // 4, f"the quick entry was decided after {after} slow ones"
    assert sum(s > quick["seq"] for s in seqs) > SLOW // 2      # logged before most of them, in their batch
    assert sorted(seqs + [quick["seq"]]) == list(range(3, SLOW + 4))   # one chain, nothing lost


def test_a_quick_entry_queued_with_a_batch_is_decided_first(tmp_path):
    clock = Clock()

    async def run():
        writer = await setup(tmp_path, clock)
        decided: list[str] = []
        # queued together, before the writer runs again: the quick one last
        slow = [asyncio.ensure_future(writer.append("demo", lambda: beat("s1", True, decided))) for _ in range(50)]
        quick = asyncio.ensure_future(writer.append("demo", lambda: beat("s1", False, decided), quick=True))
        first = (await quick)["seq"]
        seqs = [answer["seq"] for answer in await asyncio.gather(*slow)]
        await writer.stop()
        return decided, first, seqs

    decided, first, seqs = asyncio.run(run())
    assert decided[0] == "quick" and len(decided) == 51
    assert first < min(seqs)
