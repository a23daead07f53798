"""Settled changes live in the worker's database, not its memory (service/settled.py): a change
out of the queue leaves `RepoState.changes`, its record goes to the settled_changes table in the
commit of the entry that settled it, and memory keeps only the latest STATUS_WINDOW (status lists
them). Reads and a new version of a settled change go to the table, on SQLite and PostgreSQL; a
replay from a checkpoint, with the table already holding what later entries settled, builds the
same state as a replay from seq 1."""
import pytest
from entries import Chain, agent

from lonca.canonical import canonical
from lonca.service import checkpoint, settled_store
from lonca.service.settled import STATUS_WINDOW
from lonca.service.state import State
from lonca.service.store import open_engine

FACTS = {"added_files": ["a.py"], "modified_files": [], "deleted_files": [], "edits": [], "signature_changes": []}


def cid(n: int) -> str:
    return f"{n:04d}".translate(str.maketrans("0123456789", "klmnopqrst"))


def history() -> Chain:
    """kkkk conflicts, 25 changes integrate after it (it leaves memory), then a new version of
    kkkk integrates too: the table ends with a row of kkkk that a replay of the middle must not see."""
    c = Chain()
    c.start("s1")
    first = cid(0)

    def propose(change: str) -> None:
        c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40,
               "claim": {"intent": "add"}}, actor=agent("s1"), facts=FACTS)
        c.clock.step(1)
    propose(first)
    c.add({"op": "change.integrate", "change": first, "merged": None, "conflicts": ["a.py#f"]},
          outcome="deny", reasons=("merge_conflict",))
    for n in range(1, 26):
        propose(cid(n))
        c.add({"op": "change.integrate", "change": cid(n), "merged": f"{n:040x}", "conflicts": []})
    propose(first)
    c.add({"op": "change.integrate", "change": first, "merged": "f" * 40, "conflicts": []})
    return c


@pytest.fixture
def engine(database_url, tmp_path):
    e = open_engine(database_url or f"sqlite:///{tmp_path / 'lonca.db'}")
    yield e
    e.dispose()


def replay_writing(c: Chain, st: State, engine, start: int = 1) -> State:
    """Apply the entries from `start`, committing what each settles as the log writer does."""
    for entry, h, _ in c.rows[start - 1:]:
        st.apply(c.repo, entry, h)
        rows = settled_store.pending_rows(st.repos.values())
        with engine.begin() as conn:
            settled_store.write(conn, rows)
        settled_store.mark_written(st.repos.values(), rows)
    return st


def test_settled_records_leave_memory_and_come_back_from_the_table(engine):
    c = history()
    rs = replay_writing(c, State(settled_reader=settled_store.TableReader(engine)), engine).repo("demo")
    assert rs.changes == {} and rs.settled.unwritten == {} and rs.settled.latest == {}
    assert len(rs.settled.recent) <= STATUS_WINDOW and cid(1) not in rs.settled.recent
    early = rs.change(cid(1))       # read from the table
    assert early.status == {"status": "integrated", "commit": f"{1:040x}"} and early.claim is None
    again = rs.change(cid(0))
    proposals = [e["seq"] for e, _, _ in c.rows if e["op"].get("change") == cid(0) and e["op"]["op"] == "change.propose"]
    assert again.version == 2 and again.versions == proposals and again.status["status"] == "integrated"
    assert again.created_ms == c.rows[proposals[0] - 1][0]["time_ms"]   # the first version's, from its row
    reader = settled_store.TableReader(engine)
    assert reader.get("demo", cid(0), proposals[1]).status["status"] == "conflicted"  # as it was before v2
    assert reader.ids("demo", "kkk") == [cid(n) for n in range(10)]
    assert {r.id for r in reader.integrated("demo", {"s1"})} == {cid(n) for n in range(26)}


def test_a_replay_from_any_checkpoint_reads_the_table_as_it_was(engine):
    """The table holds every row of the log's settled changes; a state loaded from a checkpoint
    at each seq and moved on by the rest is byte for byte the replay from seq 1."""
    c = history()
    reader = settled_store.TableReader(engine)
    whole = replay_writing(c, State(settled_reader=reader), engine)
    want = canonical(checkpoint.dump(whole, whole.repo("demo")))
    for cut in range(1, len(c.rows) + 1):
        head = State(settled_reader=reader)
        for entry, h, _ in c.rows[:cut]:
            head.apply(c.repo, entry, h)
        row = checkpoint.row(checkpoint.snapshot(head, head.repo("demo")))
        resumed = State(settled_reader=reader)
        checkpoint.load(resumed, checkpoint.usable(row, c.rows[cut - 1][1]))
        for entry, h, _ in c.rows[cut:]:
            resumed.apply(c.repo, entry, h)
        assert canonical(checkpoint.dump(resumed, resumed.repo("demo"))) == want, cut
    assert whole.repo("demo").change(cid(0)).version == 2


def test_a_new_change_minted_by_its_decision_reads_no_table_when_applied(engine):
    """A proposal of a new change (the worker made its id: SettledChanges.mint) is applied without
    a query: its reducer's lookup of an older version read the table for every proposal, on the
    event loop. A change whose id was not minted is still looked up there, and the minted id is
    looked up only once without it."""
    from sqlalchemy import event
    queries: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda conn, cur, sql, *a: queries.append(sql))
    c = Chain()
    c.start("s1")
    st = replay_writing(c, State(settled_reader=settled_store.TableReader(engine)), engine)
    rs = st.repo("demo")

    def propose(change: str) -> None:
        c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40,
               "claim": {"intent": "add"}}, actor=agent("s1"), facts=FACTS)
        st.apply(c.repo, *c.rows[-1][:2])
    queries.clear()
    propose(rs.settled.mint(cid(1)))
    assert queries == [] and rs.changes[cid(1)].version == 1
    propose(cid(2))                 # not minted: the table is asked for an older version
    assert [q for q in queries if "settled_changes" in q]
    queries.clear()
    rs.settled.mint(cid(3))
    assert rs.change(cid(3)) is None and queries == []
    assert rs.change(cid(3)) is None and queries      # once: then the table answers for it
