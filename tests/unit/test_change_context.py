"""The change page's context without a browser: reason codes in words (an unknown one as it came)
and the timeline, which reads only the log entries logged since the page was last drawn."""
import asyncio

from lonca.console.reasons import in_words
from lonca.console.timeline import Timelines

CHANGE = "k" * 32


def test_reasons_in_words_keep_what_they_do_not_know() -> None:
    assert in_words("critical_path:lonca.toml") == "it changes lonca.toml, a critical path of the policy ([review] critical_paths)"
    assert in_words("conflict:src/a.cpp#ns::f") == "it conflicts with trunk on src/a.cpp#ns::f"
    assert in_words("affected_lease:s-1:set-2") == "session s-1 holds lease set set-2 on symbols that use what this change alters"
    assert in_words("rejected: not now") == "a human rejected it: not now"
    assert in_words("merge_conflict") == "it no longer merges with trunk"
    assert in_words("brand_new:thing") == "brand_new:thing"


def entry(seq: int, op: dict, outcome: str = "allow", actor=None, evidence=()) -> dict:
    return {"entry": {"seq": seq, "time_ms": seq * 1000, "op": op, "actor": actor or {"kind": "human", "name": "alice"},
                      "decision": {"outcome": outcome, "reasons": []}, "evidence": list(evidence)}}


def test_the_timeline_reads_each_entry_once() -> None:
    agent = {"kind": "agent", "name": "ada", "session": "s-1"}
    log = [entry(1, {"op": "repo.init"}),
           entry(2, {"op": "change.propose", "change": CHANGE, "commit": "a" * 40}, "escalate", agent),
           entry(3, {"op": "change.propose", "change": "l" * 32, "commit": "b" * 40}, "allow", agent),
           entry(4, {"op": "approve", "target_seq": 2, "note": "fine"}),
           entry(5, {"op": "approve", "target_seq": 3, "note": "other"})]
    later = [entry(6, {"op": "change.integrate", "change": CHANGE, "merged": "c" * 40, "conflicts": []}, "allow",
                 {"kind": "daemon"}, [{"check": "tests", "result": "pass", "details": {"duration_ms": "12"}},
                                      {"check": "named", "result": "fail", "details": {"name": "lint", "attempt": "1", "attempts": "2"}},
                                      {"check": "named", "result": "pass",
                                       "details": {"name": "lint", "attempt": "2", "attempts": "2", "flaky": "true"}}])]
    reads = []

    async def read(start: int, limit: int):
        reads.append(start)
        return [e for e in log if e["entry"]["seq"] >= start][:limit]

    async def run():
        timelines = Timelines()
        first = await timelines.of(read, "demo", CHANGE, [2], 6)
        assert [i["kind"] for i in first.items] == ["proposed", "approved"] and reads == [2]
        assert first.notes_for(2)[0]["note"] == "fine" and first.items[0]["actor"] == "agent:ada/s-1"
        log.extend(later)
        again = await timelines.of(read, "demo", CHANGE, [2], 7)
        assert again is first and reads == [2, 6]
        assert [i["kind"] for i in again.items] == ["proposed", "approved", "integrated"]
        assert again.items[-1]["commit"] == "c" * 40 and again.items[-1]["checks"][0]["result"] == "pass"
        # a retried check shows each attempt; the pass on the retry is flaky
        assert [(c["name"], c["result"], c["attempt"], c["flaky"]) for c in again.items[-1]["checks"]] == \
            [(None, "pass", None, False), ("lint", "fail", "1", False), ("lint", "pass", "2", True)]
        await timelines.of(read, "demo", CHANGE, [2], 7)
        assert reads == [2, 6]      # nothing logged since: nothing read
    asyncio.run(run())
