"""The claim table of the change page: a malformed claim shows as it came and differs, never
breaks the page."""
from lonca.console.views import claim_rows


def test_claim_rows_flag_differences_and_survive_a_malformed_claim() -> None:
    facts = {"edits": ["a.py#f"], "adds": [], "deletes": [], "deleted_files": [], "signature_changes": []}
    rows = {r["field"]: r for r in claim_rows({"edits": ["a.py#f"], "adds": 5, "deletes": ["x", 1]}, facts)}
    assert list(rows) == ["edits", "adds", "deletes", "deleted_files", "signature_changes"]
    assert rows["edits"]["match"] and rows["deleted_files"]["match"]
    assert rows["adds"] == {"field": "adds", "claimed": ["5"], "facts": [], "match": False}
    assert rows["deletes"]["claimed"] == ['["x", 1]'] and not rows["deletes"]["match"]


def test_review_rows_are_written_once_an_entry_and_again_when_it_changes():
    from lonca.console.views import review_rows
    p = {"seq": 7, "created_ms": 1_764_500_000_000, "actor": "agent:ada/s1", "op": {"op": "change.propose"},
         "reasons": ["critical_path:a.py"], "change": "k" * 32, "intent": "<b>fees</b>", "agent": "ada",
         "task": "t", "paths": [f"p{i}.py" for i in range(7)], "checks": [], "runs": ["tests"]}
    first = str(review_rows("demo", [p]))
    assert first == str(review_rows("demo", [dict(p)]))
    assert "&lt;b&gt;fees&lt;/b&gt;" in first and "+2 more" in first and 'data-since="1764500000000"' in first
    assert ">tests<" in first and "tests, build" in str(review_rows("demo", [{**p, "runs": ["tests", "build"]}]))
    policy = {**p, "change": None, "op": {"op": "policy.set", "commit": "c" * 40}}   # not a change: its op is shown
    assert "policy.set" in str(review_rows("demo", [policy]))
