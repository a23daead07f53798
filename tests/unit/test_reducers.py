"""The reducer table (service/reducers.py): replay from entry lists, with a steppable clock, and
with no method module loaded."""
import json
import re
import subprocess
import sys
from pathlib import Path

from entries import Chain, agent, replay

ROOT = Path(__file__).resolve().parents[2]

REPLAY_ALONE = """
import json, sys
sys.path.insert(0, {here!r})
from entries import Chain, replay
c = Chain()
c.start("s1"); c.start("s2")
c.acquire("s1", "L1", ["a.py#f"])
c.message("s2", "s1", "may I have f?")
c.beat("s1")
st = replay(c)
rs = st.repo("demo")
held = sorted(rs.sets)
c.release("s1", "L1"); c.end("s2")
st = replay(c, st, start=len(c.rows) - 1)
print(json.dumps({{"held": held, "after": sorted(rs.sets), "ended": rs.sessions["s2"].ended,
                  "inbox": [e["kind"] for e in rs.events.get("s1", [])], "next_seq": rs.next_seq,
                  "modules": sorted(m for m in sys.modules if m.startswith("lonca."))}}))
"""


def test_replay_needs_the_reducers_alone():
    """A fresh interpreter replays a log having imported the state and the reducers only: no
    method module, the daemon or the method table."""
    out = subprocess.run([sys.executable, "-c", REPLAY_ALONE.format(here=str(Path(__file__).parent))],
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["held"] == ["L1"] and got["after"] == [] and got["ended"] is True
    assert got["inbox"] == ["message"] and got["next_seq"] == 9
    loaded = [m for m in got["modules"] if m.startswith("lonca.service.")]
    assert "lonca.service.reducers" in loaded
    assert not [m for m in loaded if m.endswith("_methods") or m.split(".")[-1] in
                {"daemon", "method_table", "queue_runner", "log"}], loaded


def logged_kinds() -> set[str]:
    """Every op kind the worker's writer can log: the kinds its decisions spell out, and those
    a human may submit signed (human.submit's table)."""
    from lonca.service.method_table import SUBMIT_OPS
    kinds = set(SUBMIT_OPS)
    for f in (ROOT / "service").glob("*.py"):
        kinds |= set(re.findall(r'"op": "([a-z_.]+)"', f.read_text()))
    return kinds


def test_every_logged_kind_has_a_reducer():
    from lonca.service.reducers import REDUCERS
    kinds = logged_kinds()
    assert {"repo.init", "session.start", "lease.acquire", "change.integrate", "freeze"} <= kinds
    assert kinds - set(REDUCERS) == set()


def test_a_lease_runs_out_with_the_entries_time():
    c = Chain()
    c.start("s1")
    c.acquire("s1", "L1", ["a.py#f"], ttl_ms=10_000)
    c.clock.step(9_999)
    c.beat("s1")
    assert "L1" in replay(c).repo("demo").sets
    c.clock.step(1)
    c.beat("s1")  # any entry at or past the set's end drops it
    assert "L1" not in replay(c).repo("demo").sets


def test_a_silent_session_loses_its_leases_after_the_heartbeat_timeout():
    c = Chain()
    c.start("s1")
    c.start("s2")
    c.beat("s1")
    c.acquire("s1", "L1", ["a.py#f"])
    timeout = replay(c).repo("demo").policy.heartbeat_timeout_ms
    c.clock.step(timeout - 1)
    c.beat("s2")
    assert "L1" in replay(c).repo("demo").sets
    c.clock.step(1)
    c.beat("s2")
    assert "L1" not in replay(c).repo("demo").sets


def test_a_denied_acquire_marks_the_holder_wanted():
    c = Chain()
    c.start("s1")
    c.start("s2")
    c.acquire("s1", "L1", ["a.py#f"])
    c.clock.step(5)
    c.acquire("s2", "L2", ["a.py#f"], outcome="deny")
    rs = replay(c).repo("demo")
    assert rs.sets["L1"].wanted_ms == c.clock() and "L2" not in rs.sets


def test_an_acquire_policy_cedar_denies_leaves_the_holder_unwanted():
    """The session can never have the items: it waits for nothing, and the holder may renew."""
    c = Chain()
    c.start("s1")
    c.start("s2")
    c.acquire("s1", "L1", ["a.py#f"])
    c.add({"op": "lease.acquire", "set": "L2", "items": [{"symbol": "a.py#f", "kind": "edit"}], "ttl_ms": 600_000,
           "intent": "work"}, actor=agent("s2"), outcome="deny", reasons=["lease_held:a.py#f:s1:work", "policy_forbid:x"])
    assert replay(c).repo("demo").sets["L1"].wanted_ms is None


def test_replay_in_two_parts_equals_replay_at_once():
    c = Chain()
    c.start("s1")
    c.start("s2")
    c.acquire("s1", "L1", ["a.py#f", "b.py#<file>"])
    c.message("s1", "s2", "hi")
    half = len(c.rows)
    c.clock.step(100)
    c.release("s1", "L1")
    c.end("s1")
    whole = replay(c).repo("demo")
    parts = replay(c, replay(_prefix(c, half)), start=half + 1).repo("demo")
    assert (whole.next_seq, whole.head_hash, sorted(whole.sets), whole.sessions["s1"].ended) == \
        (parts.next_seq, parts.head_hash, sorted(parts.sets), parts.sessions["s1"].ended)


def _prefix(c: Chain, n: int) -> Chain:
    p = Chain.__new__(Chain)
    p.repo, p.clock, p.key, p.rows = c.repo, c.clock, c.key, c.rows[:n]
    return p


def test_a_continuation_ends_the_old_session_and_passes_only_pinned_items():
    """`_take_over` from hand-made entries: the old session's live set ends, its set pinned to a
    change in flight moves with the pinned items, an event for the old session reaches the new one,
    and verification time counts on the line's first session."""
    c = Chain()
    c.start("s1", scope={"paths": ["a.py"]})
    c.acquire("s1", "L1", ["a.py#f"])
    c.acquire("s1", "L2", ["a.py#g"])
    change = "k" * 32
    c.add({"op": "change.propose", "change": change, "commit": "c" * 40, "base": "a" * 40, "claim": {"intent": "f"},
           "pins": [{"set": "L1", "items": [{"symbol": "a.py#f", "kind": "edit"}]}]},
          actor=agent("s1"), facts={"modified_files": ["a.py"], "edits": ["a.py#f"]})
    c.add({"op": "session.start", "session": "s2", "agent": "agent-s1", "model": None, "task": None,
           "scope": {"paths": ["a.py"], "symbols": None, "ops": [], "max_files": None, "max_lines": None},
           "expires_ms": c.clock() + 3_600_000, "continues": "s1"}, actor={"kind": "human", "name": "ada"})
    st = replay(c)
    held = st.repo("demo").sets
    assert "L2" not in held and held["L1"].session == "s2" and held["L1"].items == [] and change in held["L1"].pinned
    c.add({"op": "change.integrate", "change": change, "trunk_before": "a" * 40, "merged": "d" * 40, "conflicts": []},
          evidence=[{"check": "tests", "result": "pass", "details": {"duration_ms": "1500"}}])
    rs = replay(c, st, start=len(c.rows)).repo("demo")
    old, new = rs.sessions["s1"], rs.sessions["s2"]
    assert old.ended and old.continued_by == "s2" and new.continued_from == "s1" and new.scope["scratch"] == []
    assert rs.workspace_sessions("s2") == {"s1", "s2"} and "L1" not in rs.sets  # the pinned items left with it
    assert rs.change(change).status == {"status": "integrated", "commit": "d" * 40} and change not in rs.changes
    assert [e["kind"] for e in rs.events["s2"]] == ["integrated"] and "s1" not in rs.events
    assert (old.verification_ms, new.verification_ms) == (1500, 1500)   # the line's, on its first and its current


def test_approvers_count_as_the_human_who_enrolled_them():
    """enrolled_by lineage (docs/decisions.md, "An agent must not approve its own change"): names
    enrolled by a human count as that human, back to the first human or a name of the policy's
    distinct_humans, and a loop of enrolments (a name revoked, then enrolled again by a name it
    enrolled) still ends."""
    from dataclasses import replace

    c = Chain()
    human = lambda name: {"kind": "human", "name": name}  # noqa: E731
    key = lambda n: {"alg": "ed25519", "public": f"{n:064x}"}  # noqa: E731
    c.add({"op": "human.enroll", "human": "ada-cli", "key": key(1)}, human("ada"))
    c.add({"op": "human.enroll", "human": "bo", "key": key(2)}, human("ada"))
    c.add({"op": "human.enroll", "human": "bo-phone", "key": key(3)}, human("bo"))
    c.add({"op": "human.revoke", "human": "ada", "reason": "left"}, human("bo"))
    c.add({"op": "human.enroll", "human": "ada", "key": key(4)}, human("bo"))
    rs = replay(c).repo("demo")
    # the loop ada -> bo -> ada is one human, whichever name the count starts from
    assert {rs.principal(n) for n in ("ada", "ada-cli", "bo", "bo-phone")} == {"ada"}
    rs.policy = replace(rs.policy, distinct_humans=("bo",))
    assert {n: rs.principal(n) for n in ("ada", "ada-cli", "bo", "bo-phone")} == \
        {"ada": "bo", "ada-cli": "bo", "bo": "bo", "bo-phone": "bo"}


def test_a_revoked_capability_ends_with_the_capabilities_made_from_it():
    c = Chain()
    c.start("s1")
    c.start("s2")
    c.add({"op": "cap.attenuate", "parent": "s1", "child": "s1-c", "agent": "helper", "scope": {"paths": ["**"]},
           "expires_ms": c.clock() + 3_600_000}, {"kind": "agent", "session": "s1", "agent": "agent-s1"})
    c.add({"op": "cap.revoke", "session": "s1", "reason": "token leaked"}, {"kind": "human", "name": "ada"})
    rs = replay(c).repo("demo")
    assert rs.sessions["s1"].ended and rs.sessions["s1-c"].ended and not rs.sessions["s2"].ended
