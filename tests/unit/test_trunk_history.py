"""Every commit that was trunk lives in the worker's database, not its memory
(service/trunk_history.py): memory and the checkpoint keep the latest WINDOW, the trunks table
every one, written with the entry that made it trunk. A base older than the window is read from
the table (on a thread, then kept for the decision), on SQLite and PostgreSQL; a replay from a
checkpoint builds the same state as a replay from seq 1."""
import asyncio

import pytest
from entries import Chain

from lonca.canonical import canonical
from lonca.service import checkpoint, settled_store, trunk_store
from lonca.service.state import State
from lonca.service.store import open_engine
from lonca.service.trunk_history import WINDOW

TRUNKS = WINDOW + 300   # imports after repo.init: the first 300 and repo.init's trunk leave memory


def commit(n: int) -> str:
    return f"{n:040x}"


def history() -> Chain:
    """TRUNKS imports, then commit(5) imported again: its latest count is the one that answers."""
    c = Chain()
    for n in range(1, TRUNKS + 1):
        c.add({"op": "import.external", "refname": "refs/heads/main", "commit": commit(n)}, actor={"kind": "human", "name": "ada"})
    c.add({"op": "import.external", "refname": "refs/heads/main", "commit": commit(5)}, actor={"kind": "human", "name": "ada"})
    return c


@pytest.fixture
def engine(database_url, tmp_path):
    e = open_engine(database_url or f"sqlite:///{tmp_path / 'lonca.db'}")
    yield e
    e.dispose()


def readers(engine) -> State:
    return State(settled_reader=settled_store.TableReader(engine), trunk_reader=trunk_store.TableReader(engine))


def replay_writing(c: Chain, st: State, engine, start: int = 1, every: int = 1) -> State:
    """Apply the entries from `start`, committing what they made trunk every `every` entries, as
    the log writer commits a batch."""
    for n, (entry, h, _) in enumerate(c.rows[start - 1:], 1):
        st.apply(c.repo, entry, h)
        if n % every == 0 or start - 1 + n == len(c.rows):
            rows = trunk_store.pending_rows(st.repos.values())
            with engine.begin() as conn:
                trunk_store.write(conn, rows)
            trunk_store.mark_written(st.repos.values(), rows)
    return st


def test_trunks_leave_memory_and_come_back_from_the_table(engine):
    from sqlalchemy import event
    c = history()
    rs = replay_writing(c, readers(engine), engine, every=7).repo("demo")
    assert len(rs.trunks.recent) == WINDOW and rs.trunks.unwritten == {}
    assert commit(1) not in rs.trunks.recent and c.rows[0][0]["op"]["trunk"] not in rs.trunks.recent
    assert len(checkpoint.dump(State(), rs)["trunks"]) == WINDOW   # the checkpoint holds the window only
    queries: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda conn, cur, sql, *a: queries.append(sql))
    assert rs.trunks.position(commit(TRUNKS)) == TRUNKS and queries == []      # in the window
    assert rs.trunks.position(commit(5)) == TRUNKS + 1 and queries == []       # trunk twice: its latest
    assert asyncio.run(rs.trunks.find(commit(1))) == 1 and len(queries) == 1  # from the table
    assert rs.trunks.position(commit(1)) == 1 and len(queries) == 1            # kept for the decision
    assert rs.trunks.position(c.rows[0][0]["op"]["trunk"]) == 0                # repo.init's
    assert asyncio.run(rs.trunks.find("e" * 40)) is None                       # never trunk
    assert rs.trunks.known("e" * 40) and rs.trunks.position("e" * 40) is None and len(queries) == 3


def test_a_recalled_answer_gives_way_to_a_later_trunk(engine):
    """A commit the table said was never trunk, made trunk since, answers its count."""
    c = history()
    st = replay_writing(c, readers(engine), engine, every=50)
    rs = st.repo("demo")
    assert asyncio.run(rs.trunks.find("e" * 40)) is None
    c.add({"op": "import.external", "refname": "refs/heads/main", "commit": "e" * 40}, actor={"kind": "human", "name": "ada"})
    st.apply(c.repo, *c.rows[-1][:2])
    assert rs.trunks.position("e" * 40) == TRUNKS + 2 and ("e" * 40, TRUNKS + 2) in rs.trunks.to_write()


def test_a_replay_from_any_checkpoint_dumps_the_same_bytes(engine):
    """A state loaded from a checkpoint and moved on by the rest dumps the replay from seq 1's
    bytes, and answers the same for every commit (old ones from the table)."""
    c = history()
    whole = replay_writing(c, readers(engine), engine, every=100)
    want = canonical(checkpoint.dump(whole, whole.repo("demo")))
    for cut in (1, 2, 97, WINDOW, WINDOW + 1, WINDOW + 150, len(c.rows) - 1, len(c.rows)):
        head = readers(engine)
        for entry, h, _ in c.rows[:cut]:
            head.apply(c.repo, entry, h)
        row = checkpoint.row(checkpoint.snapshot(head, head.repo("demo")))
        resumed = readers(engine)
        checkpoint.load(resumed, checkpoint.usable(row, c.rows[cut - 1][1]))
        for entry, h, _ in c.rows[cut:]:
            resumed.apply(c.repo, entry, h)
        assert canonical(checkpoint.dump(resumed, resumed.repo("demo"))) == want, cut
        rs = resumed.repo("demo")
        assert [rs.trunks.position(commit(n)) for n in (1, 5, 299, 301, TRUNKS)] == [1, TRUNKS + 1, 299, 301, TRUNKS], cut
