"""The scenario corpus: every merge keeps both sides' changes or reports the conflict."""
from __future__ import annotations

import pygit2
import pytest

from lonca.queue import merge_trees
from lonca.symbols import TreeEntry, compute_facts, symbol_table

from queue_corpus import SCENARIOS, Scenario
from queue_git import write_tree

# files the scenario does not touch, changed on one side each, must come through as well
OTHER_BASE = {"README": b"readme\n", "lib/util.py": b"def u():\n    return 0\n"}
OTHER_OURS = {"README": b"readme, trunk\n"}
OTHER_THEIRS = {"lib/util.py": b"def u():\n    return 1\n", "lib/extra.py": b"X = 1\n"}


def _side(s: Scenario, content: bytes | None, other: dict) -> dict[str, bytes]:
    files = dict(OTHER_BASE, **other)
    if content is not None:
        files[s.path] = content
    return files


def _trees(repo, s: Scenario):
    base = {**OTHER_BASE, **({s.path: s.base} if s.base is not None else {})}
    return (write_tree(repo, base), write_tree(repo, _side(s, s.ours, OTHER_OURS)),
            write_tree(repo, _side(s, s.theirs, OTHER_THEIRS)))


def test_corpus_covers_the_issue():
    assert len(SCENARIOS) >= 30
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    languages = {s.language for s in SCENARIOS}
    assert {"py", "js", "ts", "go", "rs", "md"} <= languages


def _changed_symbols(before: bytes | None, after: bytes | None, path: str) -> dict[str, bytes | None]:
    """Symbol id -> text in `after` for what changed from `before` (None: deleted)."""
    def texts(data):
        if data is None:
            return {}
        t = symbol_table(path, data)
        return {s.id: data[s.start_byte:s.end_byte] for s in t.symbols if s.kind not in ("file", "def")}
    b, a = texts(before), texts(after)
    return {k: a.get(k) for k in b.keys() | a.keys() if b.get(k) != a.get(k)}


def _renames(before: bytes | None, after: bytes | None, path: str) -> dict[str, str]:
    """new id -> old id, as the symbol engine's facts see them."""
    if before is None or after is None:
        return {}
    blobs = {"b": before, "a": after}
    facts = compute_facts({path: TreeEntry("b", "100644")}, {path: TreeEntry("a", "100644")}, blobs.__getitem__)
    return {new: old for old, new in facts.renames}


def assert_keeps_both(s: Scenario, merged: bytes) -> None:
    """Every symbol one side changed, and the other did not, is in the result as that side
    left it (an independent check beside the expected text). A symbol one side renamed and
    the other edited is checked by the expected text alone."""
    mine = _changed_symbols(s.base, merged, s.path)
    sides = [(_changed_symbols(s.base, x, s.path), _renames(s.base, x, s.path)) for x in (s.ours, s.theirs)]
    for (side, renames), (other, _) in (sides, sides[::-1]):
        for sym, text in side.items():
            if sym in other or renames.get(sym) in other:
                continue
            assert mine.get(sym, "unchanged") == text, (sym, text)


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_scenario(tmp_path, s: Scenario):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    base, ours, theirs = _trees(repo, s)
    line_merge = repo.merge_trees(base, ours, theirs)
    conflicted = {(e.path for e in c if e is not None).__next__() for c in (line_merge.conflicts or ())}
    assert ("conflict" if s.path in conflicted else "clean") == s.git
    result = merge_trees(repo, base, ours, theirs)
    if s.merged is not None:
        assert result.conflicts == []
        out = repo[result.tree]
        assert out[s.path].data == s.merged
        assert out["README"].data == b"readme, trunk\n"
        assert out["lib/util.py"].data == b"def u():\n    return 1\n"
        assert out["lib/extra.py"].data == b"X = 1\n"
        if s.path.rsplit(".", 1)[-1] in ("py", "js", "ts", "go", "rs", "md"):
            assert symbol_table(s.path, s.merged).status == "parsed"
            assert_keeps_both(s, s.merged)
        if s.git == "conflict":
            assert s.path in result.merged_paths
    else:
        assert result.tree is None
        assert result.conflicts == s.conflicts
        assert result.conflicted_paths == [s.path]
        text = result.conflict_text(s.path, "c0ffee")
        if s.path.endswith(".bin"):
            assert text is None
            return
        assert b"<<<<<<< local c0ffee\n" in text
        assert b"======= c0ffee\n" in text
        assert b">>>>>>> trunk c0ffee\n" in text
        for line in s.marked:
            assert line in text
        # local (the change) stands before trunk
        for line in s.marked[:1]:
            if s.theirs is not None and line in s.theirs and s.ours is not None and line not in s.ours:
                assert text.index(line) < text.index(b"======= c0ffee")
