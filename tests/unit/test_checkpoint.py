"""State checkpoints (service/checkpoint.py): a state loaded from a checkpoint and moved on by the
entries after it is byte for byte the state replayed from seq 1; a checkpoint that does not cover
the log's entry at its seq, is torn, or of another format is not used."""
from entries import Chain, replay

from lonca.canonical import canonical
from lonca.service import checkpoint
from lonca.service.state import State


def busy_chain() -> Chain:
    """Sessions, leases held, lent and run out, messages, interests, ends: most of what replay builds."""
    c = Chain()
    for s in ("s1", "s2", "s3"):
        c.start(s)
        c.beat(s)
    c.acquire("s1", "L1", ["a.py#f", "b.py#<file>"], ttl_ms=5_000)
    c.acquire("s2", "L2", ["a.py#g"])
    c.acquire("s3", "L3", ["a.py#f"], outcome="deny")
    c.add({"op": "lease.interest", "items": [{"symbol": "a.py#f", "kind": "edit"}], "intent": "after you"},
          actor={"kind": "agent", "session": "s3", "agent": "agent-s3"})
    c.message("s2", "s1", "hello")
    for change in ("kkkk", "llll"):  # one integrated (settled: claim and facts left to the log), one queued
        c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40,
               "claim": {"intent": "edit", "edits": ["a.py#g"]}}, actor={"kind": "agent", "session": "s2", "agent": "agent-s2"},
              facts={"edits": ["a.py#g"], "signature_changes": ["a.py#g"], "modified_files": ["a.py"]})
    c.add({"op": "change.integrate", "change": "kkkk", "merged": "d" * 40})
    human = {"kind": "human", "name": "alice"}
    c.add({"op": "redact", "blob": "e" * 40, "reason": "a key"}, actor=human)
    c.add({"op": "redact", "blob": "f" * 40, "reason": "forbidden"}, actor=human, outcome="deny", reasons=("policy_forbid:x",))
    c.clock.step(6_000)
    c.beat("s2")  # L1 runs out; s3's interest becomes a reservation
    c.end("s2")
    for i in range(5):
        c.message("s1", "s3", f"m{i}")
        c.clock.step(10)
    return c


def test_load_then_replay_the_rest_equals_replay_from_the_start():
    c = busy_chain()
    whole = replay(c)
    want = canonical(checkpoint.dump(whole, whole.repo("demo")))
    for cut in range(1, len(c.rows) + 1):
        head = _replay_prefix(c, cut)
        row = checkpoint.row(checkpoint.snapshot(head, head.repo("demo")))
        assert row.seq == cut and row.hash == c.rows[cut - 1][1]
        resumed = State()
        checkpoint.load(resumed, checkpoint.usable(row, c.rows[cut - 1][1]))
        replay(c, resumed, start=cut + 1)
        assert canonical(checkpoint.dump(resumed, resumed.repo("demo"))) == want, cut
    assert whole.repo("demo").reservations and whole.repo("demo").events["s3"]
    assert whole.repo("demo").change("kkkk").claim is None and whole.repo("demo").queue == ["llll"]
    assert whole.repo("demo").redacted == {"e" * 40}  # a denied redact redacts nothing


def test_a_snapshot_stays_as_it_was_taken():
    """The worker encodes a snapshot on a thread while the loop applies more entries to the state."""
    c = busy_chain()
    st = _replay_prefix(c, len(c.rows) - 5)
    want = canonical(checkpoint.dump(st, st.repo("demo")))
    snap = checkpoint.snapshot(st, st.repo("demo"))
    replay(c, st, start=len(c.rows) - 4)  # messages appended to the events lists the dump holds
    assert checkpoint.row(snap).state.encode() == want != canonical(checkpoint.dump(st, st.repo("demo")))


def _replay_prefix(c: Chain, n: int) -> State:
    st = State()
    for entry, h, _ in c.rows[:n]:
        st.apply(c.repo, entry, h)
    return st


def test_a_checkpoint_that_does_not_match_is_not_used():
    c = busy_chain()
    st = replay(c)
    row = checkpoint.row(checkpoint.snapshot(st, st.repo("demo")))
    at = c.rows[-1][1]
    assert checkpoint.usable(row, at) is not None
    assert checkpoint.usable(row, c.rows[-2][1]) is None  # the log's entry at seq is another
    assert checkpoint.usable(row, None) is None  # the log has no entry at seq (restored from a backup)
    assert checkpoint.usable(None, at) is None
    torn = row.model_copy(update={"state": row.state[:-1]})
    assert checkpoint.usable(torn, at) is None
    assert checkpoint.usable(row.model_copy(update={"format": checkpoint.FORMAT + 1}), at) is None


def test_a_pruned_expiry_heap_resumes_to_the_same_state():
    """The expiry heap is pruned when it doubles (RepoState.schedule_expiry), so a state resumed
    from a checkpoint prunes at other entries than one replayed whole: the checkpoint holds the
    items that can still run out, sorted, which both agree on."""
    c = Chain()
    c.start("s1")
    for i in range(300):  # held all along: a pruned heap keeps more than it starts with
        c.acquire("s1", f"H{i}", [f"h{i}.py#g"], ttl_ms=600_000)
    for i in range(700):
        c.acquire("s1", f"L{i}", ["a.py#f"], ttl_ms=600_000)
        c.release("s1", f"L{i}")
        c.clock.step(10)
    whole = replay(c)
    want = canonical(checkpoint.dump(whole, whole.repo("demo")))
    for cut in range(300, len(c.rows), 97):
        head = _replay_prefix(c, cut)
        resumed = State()
        checkpoint.load(resumed, checkpoint.usable(checkpoint.row(checkpoint.snapshot(head, head.repo("demo"))),
                                                   c.rows[cut - 1][1]))
        replay(c, resumed, start=cut + 1)
        assert canonical(checkpoint.dump(resumed, resumed.repo("demo"))) == want, cut
