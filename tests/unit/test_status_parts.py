"""status's lists of history are encoded once an entry (service/status_parts.py) and spliced into
answers as they are (wire_json.Raw): they say what a fresh rendering says, stay until an entry or a
replay, and a session over reads inactive in them."""
import json

import pytest
from entries import Chain, agent, replay

from lonca.service import wire_json
from lonca.service.state import STATUS_WINDOW
from lonca.service.status_parts import StatusParts, change_json, listed_changes


def propose(c: Chain, session: str, change: str, outcome: str = "allow") -> dict:
    facts = {"added_files": [f"{change}.py"], "modified_files": [], "deleted_files": []}
    return c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40,
                  "claim": {"intent": f"add {change}"}}, actor=agent(session), outcome=outcome,
                 reasons=["claim_mismatch:adds"] if outcome == "deny" else [], facts=facts)


def history() -> Chain:
    c = Chain()
    c.start("live")
    for i in range(STATUS_WINDOW + 5):
        c.start(f"s{i}")
        c.end(f"s{i}")
    propose(c, "live", "queued")
    propose(c, "live", "denied", outcome="deny")
    return c


def fresh(parts: StatusParts, rs, now: int) -> tuple[list, list]:
    """The two lists as status rendered them before they were kept."""
    sessions = [parts.session_json(rs, s, now) for s in [*rs.live_sessions, *rs.gone_sessions]]
    changes = [change_json(rs, ch) for ch in sorted(listed_changes(rs), key=lambda ch: ch.proposed_seq)]
    return sessions, changes


def test_the_parts_say_what_a_fresh_rendering_says():
    c = history()
    rs = replay(c).repo("demo")
    parts = StatusParts({})
    now = c.clock()
    sessions, changes = fresh(parts, rs, now)
    assert len(sessions) == 1 + STATUS_WINDOW and [ch["change"] for ch in changes] == ["queued", "denied"]
    line = wire_json.dumps({"id": 1, "ok": True, "result": {"sessions": parts.sessions(rs, now),
                                                           "changes": parts.changes(rs, now), "repo": "demo"}})
    assert json.loads(line) == {"id": 1, "ok": True, "result": {"sessions": sessions, "changes": changes, "repo": "demo"}}


def test_the_parts_stay_until_an_entry_moves_the_state():
    c = history()
    state = replay(c)
    rs = state.repo("demo")
    parts = StatusParts({})
    before = parts.changes(rs, c.clock())
    assert parts.changes(rs, c.clock()) is before  # nothing logged since: the same encoded part
    c.clock.step(1_000)
    propose(c, "live", "second")
    replay(c, state, start=rs.next_seq)
    after = json.loads(parts.changes(rs, c.clock()).data)
    assert [ch["change"] for ch in after] == ["queued", "denied", "second"]
    c.end("live")
    replay(c, state, start=rs.next_seq)
    listed = [s["id"] for s in json.loads(parts.sessions(rs, c.clock()).data)]
    assert listed[-1] == "live" and len(listed) == STATUS_WINDOW  # over now: the window's newest


def test_a_replay_at_the_same_seq_is_encoded_again():
    """A replay (after a failed commit) makes a new RepoState, maybe at the seq the old one had."""
    a, b = Chain(), Chain()
    propose(a, "x", "one")
    propose(b, "x", "two")
    parts = StatusParts({})
    first, second = replay(a).repo("demo"), replay(b).repo("demo")
    assert first.next_seq == second.next_seq
    assert [ch["change"] for ch in json.loads(parts.changes(first, a.clock()).data)] == ["one"]
    assert [ch["change"] for ch in json.loads(parts.changes(second, b.clock()).data)] == ["two"]


def test_a_session_that_ran_out_reads_inactive():
    c = Chain()
    c.start("keeps")
    c.start("runs-out", ttl_ms=1_000)
    c.clock.step(1_000)
    c.beat("keeps")  # the entry that finds runs-out over
    rs = replay(c).repo("demo")
    listed = json.loads(StatusParts({}).sessions(rs, c.clock()).data)
    assert [(s["id"], s["active"]) for s in listed] == [("keeps", True), ("runs-out", False)]


def test_an_answer_splices_raw_parts_as_they_are():
    assert wire_json.dumps({"a": wire_json.Raw(b'[1,{"b":2}]'), "c": "\x00raw-0\x00"}) == \
        b'{"a":[1,{"b":2}],"c":"\\u0000raw-0\\u0000"}\n'
    assert wire_json.encode({"k": ["v"]}) == b'{"k":["v"]}'
    with pytest.raises(TypeError):
        wire_json.dumps({"a": object()})  # the server answers internal, as before
