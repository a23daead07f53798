"""A base's name index made from the previous base's and the paths that changed (warm_base
with `since`) answers what one made from scratch answers, over a sequence of trunk moves:
bodies edited, functions added, renamed and deleted, files added, deleted, turned into
symlinks and into text no grammar reads."""
from __future__ import annotations

import random

from symtrees import Blobs

from lonca.symbols import SymbolCache, TreeEntry, warm_base
from lonca.symbols.mentions import NameIndex, base_tables, mentioning
from lonca.symbols.table import NOT_NAMES


def module(i: int, rnd: random.Random) -> bytes:
    callee = f"f{rnd.randrange(40)}"
    return (f"def f{i}(x):\n    return {callee}(x) + helper(x)\n\n\n"
            f"class C{i}:\n    def run(self):\n        return f{i}(1)\n").encode()


def move(files: dict[str, bytes], modes: dict[str, str], rnd: random.Random, step: int) -> None:
    """One trunk move: a few random edits of `files` (and `modes`), in place."""
    for _ in range(rnd.randrange(1, 4)):
        path = rnd.choice(sorted(files))
        kind = rnd.randrange(8)
        text = files[path]
        if kind == 0:
            files[path] = text.replace(b"+ helper(x)", b"+ helper(x) * %d" % step, 1)
        elif kind == 1:     # a name new to the vocabulary, which other files already mention
            files[path] = text + b"\n\ndef shared%d(y):\n    return y\n" % rnd.randrange(5)
        elif kind == 2:     # a rename: a name leaves the vocabulary
            files[path] = text.replace(b"def f", b"def g", 1)
        elif kind == 3:
            del files[path]
            modes.pop(path, None)
        elif kind == 4:
            files[f"new{step}_{rnd.randrange(100)}.py"] = module(1000 + step, rnd) + \
                b"\n\ndef caller():\n    return shared%d(1)\n" % rnd.randrange(5)
        elif kind == 5:
            modes[path] = "120000"
        elif kind == 6:
            files[path.replace(".py", ".txt")] = files.pop(path)
            modes.pop(path, None)
        else:
            modes.pop(path, None)
            files[path] = text.replace(b"return", b"return  ", 1)


def scratch(tree: dict[str, TreeEntry], blobs: Blobs) -> dict[str, set[str]]:
    """name -> ids of the symbols mentioning it, for every name the base's symbols define,
    found by a scan of every file in a cold cache: the oracle."""
    cache = SymbolCache()
    tables = list(base_tables(tree, cache, blobs.load))
    vocabulary = {s.name for _, t in tables for s in t.symbols if s.kind not in NOT_NAMES}
    out: dict[str, set[str]] = {}
    for oid, table in tables:
        for name in vocabulary & table.names:
            found = mentioning(table, {name}, lambda oid=oid: blobs.load(oid))
            if found:
                out.setdefault(name, set()).update(found)
    return out


def answers(index: NameIndex) -> dict[str, set[str]]:
    """The same, from an index, reading no blob (the warm answered every name ahead)."""
    out: dict[str, set[str]] = {}
    for name in index.names:
        for _, table in index.holding(name):
            assert name in table.mentions, (table.path, name)
            if table.mentions[name]:
                out.setdefault(name, set()).update(table.mentions[name])
    return out


def diff(old: dict[str, TreeEntry], new: dict[str, TreeEntry]) -> dict[str, TreeEntry | None]:
    return {p: new.get(p) for p in old.keys() | new.keys() if old.get(p) != new.get(p)}


def test_incremental_warms_answer_what_a_warm_from_scratch_answers() -> None:
    rnd = random.Random(18)
    blobs = Blobs()
    files = {f"m{i}.py": module(i, rnd) for i in range(40)} | {"notes.md": b"# f1\n"}
    modes: dict[str, str] = {}
    cache = SymbolCache()
    tree = blobs.tree(files, modes)
    index = warm_base(tree, cache, blobs.load, "b0")
    assert cache.base_index("b0") is index and answers(index) == scratch(tree, blobs)
    for step in range(1, 40):
        move(files, modes, rnd, step)
        new = blobs.tree(files, modes)
        index = warm_base(diff(tree, new), cache, blobs.load, f"b{step}", since=index)
        tree = new
        assert {p: oid for p, (oid, _) in index.files.items()} == \
            {p: oid for p, (oid, _) in warm_base(tree, SymbolCache(), blobs.load).files.items()}
        assert answers(index) == scratch(tree, blobs), step
    assert cache.base_index("b39") is index and cache.base_index("b0") is None


def edited_once(seed: int, old: bytes, new: bytes) -> tuple[Blobs, dict, dict, NameIndex, NameIndex]:
    """30 modules warmed from scratch, then m3.py edited (`old` -> `new`) and warmed from that
    index: (blobs, the first tree, the second, their indexes)."""
    rnd = random.Random(seed)
    blobs = Blobs()
    files = {f"m{i}.py": module(i, rnd) for i in range(30)}
    cache = SymbolCache()
    first = blobs.tree(files)
    index = warm_base(first, cache, blobs.load, "first")
    files["m3.py"] = files["m3.py"].replace(old, new)
    second = blobs.tree(files)
    before = answers(index)
    again = warm_base(diff(first, second), cache, blobs.load, "second", since=index)
    assert answers(index) == before     # the first base's index is as it was
    assert again is not None
    return blobs, first, second, index, again


def test_an_older_base_keeps_its_index_and_a_stopped_warm_keeps_nothing() -> None:
    blobs, first, second, index, _ = edited_once(5, b"def f3", b"def g3")
    assert answers(index) == scratch(first, blobs)     # as it was before the second warm
    assert warm_base(second, SymbolCache(), blobs.load, "x", stop=lambda: True) is None


def test_an_edit_that_keeps_what_its_file_defines_copies_no_name_shard() -> None:
    """A body edited (the bench's and most agents' changes): every count and holder stays, so the
    new index shares all of the old one's name shards (a write would copy one, which the
    collector's young passes then walk); the counts are those of a warm from scratch."""
    from lonca.symbols.shared_map import SHARDS
    blobs, _, second, index, again = edited_once(7, b"+ helper(x)", b"+ helper(x) + 1")
    assert again.names.shared_with(index.names) == SHARDS
    assert dict(again.names.items()) == dict(warm_base(second, SymbolCache(), blobs.load).names.items())
