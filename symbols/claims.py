"""A claim against the facts: which of its fields say something else.

Fields are compared as sets; a missing field is empty. A field that is not a list of strings
(or, for tests, a mapping of such lists) never matches, so a malformed claim is reported, not
accepted.
"""
from __future__ import annotations

from typing import Any

from .facts import Facts

CLAIM_FIELDS = ("edits", "adds", "deletes", "deleted_files", "signature_changes", "tests")
TEST_FIELDS = ("added", "modified", "deleted", "skipped")


def _strings(value: Any) -> set[str] | None:
    if value is None:
        return set()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return set(value)
    return None


def _tests(value: Any) -> dict[str, set[str]] | None:
    if value is None:
        value = {}
    if not isinstance(value, dict) or not set(value) <= set(TEST_FIELDS):
        return None
    out = {}
    for name in TEST_FIELDS:
        got = _strings(value.get(name))
        if got is None:
            return None
        out[name] = got
    return out


def compare_claim(claim: dict, facts: Facts) -> list[dict]:
    """[{"field", "claimed", "facts"}] for each field where the claim and the facts differ;
    the caller reports each as `claim_mismatch:<field>`."""
    actual = facts.to_json()
    if not isinstance(claim, dict):
        claim = {}
    out = []
    for name in CLAIM_FIELDS:
        raw = claim.get(name)
        if name == "tests":
            got = _tests(raw)
            want = {k: set(v) for k, v in actual["tests"].items()}
            if got != want:
                shown = raw if got is None else {k: sorted(v) for k, v in got.items()}
                out.append({"field": name, "claimed": shown, "facts": actual["tests"]})
            continue
        got = _strings(raw)
        if got != set(actual[name]):
            out.append({"field": name, "claimed": raw if got is None else sorted(got),
                        "facts": actual[name]})
    return out
