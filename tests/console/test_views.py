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
