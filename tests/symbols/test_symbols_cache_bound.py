"""The symbol cache holds few tables beyond the bases' indexes (DEFAULT_TABLE_BYTES): facts of a
change read the base's table from its index, and splice the new version from it, when the cache
let that table go. At 64 MiB the cache was what the soak bench's worker grew by for ten minutes."""
from lonca.symbols import SymbolCache, TreeEntry, compute_facts, warm_base

# past SPLICE_MIN_BYTES: a smaller file is parsed whole
OLD = b"".join(b"def f%d(x):\n    return x\n\n\n" % i for i in range(200)) + b"def g(y):\n    return y\n"
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


def _filled() -> SymbolCache:
    """A cache at its default bounds: 60 files of 500 functions, each a new blob (~21 MB of
    tables and ~24 MB of trees by their estimates)."""
    cache = SymbolCache()
    for n in range(60):
        text = "".join(f"def f{n}_{i}(x):\n    return x\n" for i in range(500)).encode()
        cache.table(f"m{n}.py", f"{n:040x}", lambda: text)
    return cache


def test_a_small_repository_bounds_the_tables_and_trees_held_by_its_files():
    """Fitted to a trunk of 10,000 files the cache holds 5 MiB of tables and 10 MiB of trees:
    at the fixed 16 / 32 MiB a soak's trunk of 10,000 small files filled them with history."""
    from lonca.symbols.cache import DEFAULT_TABLE_BYTES, DEFAULT_TREE_BYTES
    cache = _filled()
    assert cache.held_bytes > 8 << 20 and cache._tree_bytes > 16 << 20
    cache.fit(10_000)
    assert cache.held_bytes <= 5 << 20 and cache._tree_bytes <= 10 << 20 and len(cache) >= 1
    big = _filled()
    big.fit(100_000)   # the scale bench's repository keeps the fixed bounds
    assert DEFAULT_TABLE_BYTES - (1 << 20) < big.held_bytes <= DEFAULT_TABLE_BYTES
    assert big._tree_bytes > DEFAULT_TREE_BYTES - (1 << 20)
    big.fit(1_000)      # a smaller repository of the same worker does not shrink the bound
    assert big._tree_bytes > DEFAULT_TREE_BYTES - (1 << 20)


def test_a_small_file_is_parsed_whole_and_a_big_one_spliced(monkeypatch):
    """Under SPLICE_MIN_BYTES a whole parse costs less than the splice's two parses of ranges
    (a preview judged on the event loop pays it there); the table is the same either way."""
    from lonca.symbols import cache as cache_module
    from lonca.symbols import splice as splice_module
    from lonca.symbols.table import parsed_table
    calls = []

    def counted(*args):
        calls.append(args[0])
        return splice_module.spliced_table(*args)
    monkeypatch.setattr(cache_module, "spliced_table", counted)
    small = b"def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"
    for name, old in (("small.py", small), ("big.py", OLD)):
        new = old.replace(b"return y", b"return y + 1")
        cache = SymbolCache()
        cache.table(name, "1" * 40, lambda: old)
        table = cache.table(name, "2" * 40, lambda: new, base="1" * 40, base_data=old)
        assert table == parsed_table(name, new)[0]
    assert calls == ["big.py"]
