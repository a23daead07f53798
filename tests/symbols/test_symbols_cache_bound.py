"""The symbol cache holds few tables beyond the bases' indexes (DEFAULT_TABLE_BYTES): facts of a
change read the base's table from its index, and splice the new version from it, when the cache
let that table go. At 64 MiB the cache was what the soak bench's worker grew by for ten minutes."""
from lonca.symbols import SymbolCache, TreeEntry, compute_facts, warm_base

OLD = b"def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"
NEW = OLD.replace(b"return y", b"return y + 1")


def test_an_edit_is_spliced_from_the_table_the_base_index_holds():
    blobs = {"1" * 40: OLD, "2" * 40: NEW}
    base = {"m.py": TreeEntry("1" * 40, "100644")}
    new = {"m.py": TreeEntry("2" * 40, "100644")}
    index = warm_base(base, SymbolCache(), blobs.__getitem__)
    cache = SymbolCache()           # holds no table: only the base's index, which holds them
    cache.keep_base_index("base", index)
    read = []

    def load(oid: str) -> bytes:
        read.append(oid)
        return blobs[oid]
    facts = compute_facts(base, new, load, cache, "base")
    assert sorted(facts.edits) == ["m.py#g"]
    assert not cache._trees, "the new version was parsed whole, not spliced from the base's table"
    assert sorted(read) == sorted(blobs), "each blob is read once: the base's table was not made again"
