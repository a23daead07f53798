"""SharedMap (symbols/shared_map.py) behaves as a dict through copies and writes on both sides
of each copy, and a base's name index made from the previous one shares all but the shards its
changes touched (a copy of 400 000 entries in one call of C held the GIL for tens of ms at
100 000 files: docs/decisions.md, "Nothing holds the GIL for long at 100 000 files")."""
from __future__ import annotations

import random

import pytest
from symtrees import Blobs

from lonca.symbols import SymbolCache, warm_base
from lonca.symbols.shared_map import SHARDS, SharedMap


def test_copies_and_writes_on_either_side_behave_as_dicts() -> None:
    rnd = random.Random(7)
    maps: list[tuple[SharedMap, dict]] = [(SharedMap({"a": 1}), {"a": 1})]
    for step in range(4000):
        i = rnd.randrange(len(maps))
        shared, plain = maps[i]
        key = f"k{rnd.randrange(600)}"
        op = rnd.randrange(6)
        if op == 0 and len(maps) < 12:
            maps.append((shared.copy(), dict(plain)))
        elif op in (1, 2):
            shared[key] = plain[key] = step
        elif op == 3:
            assert shared.pop(key, None) == plain.pop(key, None)
        elif op == 4 and key in plain:
            del shared[key]
            del plain[key]
        else:
            assert shared.get(key) == plain.get(key) and (key in shared) == (key in plain)
    for shared, plain in maps:      # no write through one map showed in another
        assert dict(shared.items()) == plain and len(shared) == len(plain)
        assert sorted(shared) == sorted(plain) and sorted(shared.values()) == sorted(plain.values())
        assert shared == plain
    with pytest.raises(KeyError):
        del SharedMap()["missing"]
    with pytest.raises(KeyError):
        SharedMap().pop("missing")


def test_a_copy_shares_every_shard_until_written() -> None:
    first = SharedMap({f"k{i}": i for i in range(10_000)})
    second = first.copy()
    assert second.shared_with(first) == SHARDS
    second["k1"] = -1
    first["k2"] = -2
    assert second.shared_with(first) >= SHARDS - 2
    assert (first["k1"], second["k1"], first["k2"], second["k2"]) == (1, -1, -2, 2)


def module(i: int) -> bytes:
    return f"def f{i}(x):\n    return f{(i * 7) % 300}(x)\n\n\nclass C{i}:\n    def run(self):\n        return f{i}(1)\n".encode()


def test_an_incremental_warm_copies_only_the_shards_its_change_touched() -> None:
    blobs = Blobs()
    files = {f"m{i}.py": module(i) for i in range(300)}
    cache = SymbolCache()
    tree = blobs.tree(files)
    before = warm_base(tree, cache, blobs.load, "b0")
    assert before is not None and len(before.names) > 600
    files["m5.py"] = files["m5.py"].replace(b"return f35(x)", b"return f36(x)")
    new = blobs.tree(files)
    after = warm_base({"m5.py": new["m5.py"]}, cache, blobs.load, "b1", since=before)
    assert after is not None
    assert after.files.shared_with(before.files) >= SHARDS - 1
    assert after.names.shared_with(before.names) >= SHARDS - 8
    assert after.files["m5.py"][0] != before.files["m5.py"][0]
