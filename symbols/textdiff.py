"""Which lines a change removes and adds, bounded in time.

Common leading and trailing lines are set aside first; what is left is matched line by line
with difflib. Past MAX_MATCHED_LINES lines left on both sides together the middle counts as
rewritten: a bound on time, at the price of overcounting a huge scattered edit.
"""
from __future__ import annotations

import difflib

MAX_MATCHED_LINES = 20_000


def changed_rows(old: list[bytes], new: list[bytes]) -> tuple[list[int], list[int]]:
    """0-based rows of `old` that go and rows of `new` that come."""
    n = min(len(old), len(new))
    prefix = 0
    while prefix < n and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < n - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    a = old[prefix:len(old) - suffix]
    b = new[prefix:len(new) - suffix]
    if not a or not b or len(a) + len(b) > MAX_MATCHED_LINES:
        return ([prefix + i for i in range(len(a))], [prefix + j for j in range(len(b))])
    removed: list[int] = []
    added: list[int] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed.extend(range(prefix + i1, prefix + i2))
            added.extend(range(prefix + j1, prefix + j2))
    return removed, added
