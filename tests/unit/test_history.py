"""What the worker keeps of its history in memory is bounded: events per session (and none for
a session that is over), and status's window of sessions over and changes done."""
import json

from entries import Chain, agent, replay

from lonca.service.event_methods import session_events
from lonca.service.state import EVENTS_KEPT, EVENTS_SLACK, EXPIRIES_MIN, STATUS_WINDOW
from lonca.service.status_parts import StatusParts


def test_a_session_keeps_its_latest_events_and_reads_from_a_seq():
    """Its latest EVENTS_KEPT stay readable, and not many more are held: 3 x EVENTS_KEPT - 200
    events left 1,800 held when the list was trimmed in halves."""
    c = Chain()
    c.start("s1")
    c.start("s2")
    for i in range(3 * EVENTS_KEPT - 200):
        c.message("s1", "s2", f"n{i}")
    rs = replay(c).repo("demo")
    kept = rs.events["s2"]
    assert EVENTS_KEPT <= len(kept) <= EVENTS_KEPT + EVENTS_SLACK
    assert kept[-1]["message"]["note"] == f"n{3 * EVENTS_KEPT - 201}" and "s1" not in rs.events
    last = kept[-1]["seq"]
    assert [e["seq"] for e in session_events(rs, "s2", last - 2, c.clock())] == [last - 2, last - 1, last]
    assert session_events(rs, "s2", last + 1, c.clock()) == []


def test_a_session_that_is_over_keeps_no_events():
    c = Chain()
    c.start("s1")
    c.start("s2", ttl_ms=1_000)
    c.message("s1", "s2", "hello")
    assert [e["kind"] for e in replay(c).repo("demo").events["s2"]] == ["message"]
    c.clock.step(1_000)
    c.beat("s1")  # the entry that finds s2 run out
    rs = replay(c).repo("demo")
    assert "s2" not in rs.events and list(rs.gone_sessions) == ["s2"]
    c.message("s1", "s2", "too late")
    assert "s2" not in replay(c).repo("demo").events


def test_status_lists_every_live_session_and_a_window_of_those_over():
    c = Chain()
    c.start("old")  # live for the whole run: listed however many came after
    for i in range(STATUS_WINDOW + 50):
        c.start(f"s{i}")
        c.end(f"s{i}")
    rs = replay(c).repo("demo")
    listed = [s["id"] for s in json.loads(StatusParts({}).sessions(rs, c.clock()).data)]
    assert listed[0] == "old" and len(listed) == 1 + STATUS_WINDOW
    assert listed[-1] == f"s{STATUS_WINDOW + 49}" and "s0" not in listed


def test_heartbeats_keep_one_pending_check_per_session():
    """However often a session beats, one heartbeat check waits for it (not one per beat), and
    a session that goes on beating keeps its leases past many timeouts."""
    c = Chain()
    c.start("s1")
    c.beat("s1")
    c.acquire("s1", "L1", ["a.py#f"], ttl_ms=10_000_000)
    timeout = replay(c).repo("demo").policy.heartbeat_timeout_ms
    for _ in range(200):
        c.clock.step(timeout // 40)
        c.beat("s1")
    rs = replay(c).repo("demo")
    assert [what for _, what, _ in rs._expiries].count("beat") == 1 and "L1" in rs.sets
    c.clock.step(timeout)
    c.start("s2")  # s1 fell silent: the first entry past its timeout ends its sets
    assert "L1" not in replay(c).repo("demo").sets


def test_a_change_out_of_the_queue_keeps_only_what_status_reads():
    """Its claim and facts stay in the log (change.get reads them there), not in memory."""
    c = Chain()
    c.start("s1")
    facts = {"edits": ["a.py#f"], "signature_changes": ["a.py#f"], "added_files": [], "modified_files": ["a.py"],
             "deleted_files": [], "lines_added": 1}
    for change in ("kkkk", "llll"):
        c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40,
               "claim": {"intent": "edit", "edits": ["a.py#f"]}}, actor=agent("s1"), facts=facts)
    c.add({"op": "change.integrate", "change": "kkkk", "merged": "d" * 40})
    rs = replay(c).repo("demo")
    done, queued = rs.change("kkkk"), rs.changes["llll"]
    assert "kkkk" not in rs.changes     # settled: out of the changes in flight
    assert done.status["status"] == "integrated" and done.claim is None
    assert done.facts == {"signature_changes": ["a.py#f"]} and done.paths == ["a.py"]
    assert queued.claim == {"intent": "edit", "edits": ["a.py#f"]} and queued.facts == facts


def test_the_expiry_heap_keeps_what_can_still_run_out():
    """A set released (or renewed) long before its TTL leaves no item behind for long: one
    lease.acquire after another on a 10-minute TTL kept one heap item each until it came due."""
    c = Chain()
    c.start("s1")
    c.acquire("s1", "held", ["b.py#g"], ttl_ms=600_000)
    for i in range(3_000):
        c.acquire("s1", f"L{i}", ["a.py#f"], ttl_ms=600_000)
        c.release("s1", f"L{i}")
        c.clock.step(10)
    rs = replay(c).repo("demo")
    assert len(rs._expiries) <= 2 * EXPIRIES_MIN
    assert [x for x in rs.expiries() if x[1] == "set"] == [(rs.sets["held"].expires_ms, "set", "held")]
    c.clock.step(600_000)
    c.beat("s1")  # the held set runs out all the same
    assert "held" not in replay(c).repo("demo").sets


def test_a_set_renewed_runs_out_at_its_last_time():
    c = Chain()
    c.start("s1")
    c.acquire("s1", "L1", ["a.py#f"], ttl_ms=600_000)
    for _ in range(2 * EXPIRIES_MIN + 10):  # a renewal a step: the heap is pruned on the way
        c.add({"op": "lease.renew", "set": "L1", "ttl_ms": 600_000}, actor=agent("s1"))
        c.clock.step(100)
    c.add({"op": "lease.renew", "set": "L1", "ttl_ms": 1_000}, actor=agent("s1"))
    c.clock.step(100)
    rs = replay(c).repo("demo")
    assert len(rs._expiries) <= 2 * EXPIRIES_MIN and "L1" in rs.sets
    c.clock.step(850)  # 950 ms after the last renewal, of 1,000
    c.beat("s1")
    assert "L1" in replay(c).repo("demo").sets
    c.clock.step(100)
    c.beat("s1")
    assert "L1" not in replay(c).repo("demo").sets
