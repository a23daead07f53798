"""Symbol tables on disk (service/symbol_store.py): what a warm wrote is read back by a new
worker's cache without reading or parsing a blob, mentions included; a file of another engine
or format is emptied; the in-memory cache is bounded by bytes."""
from __future__ import annotations

import pathlib
import pickle
import sqlite3
import sys
import sysconfig

sys.path.insert(0, str(pathlib.Path(__file__).parent / "symbols"))
from symtrees import Blobs  # noqa: E402

from lonca.service.symbol_store import SqliteTables  # noqa: E402
from lonca.symbols import SYMBOLS_ENGINE, SymbolCache, warm_base  # noqa: E402
from lonca.symbols.cache import TABLE_FORMAT, decode, encode, table_bytes  # noqa: E402

STDLIB = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]


def no_reads(oid: str) -> bytes:
    raise AssertionError(f"blob {oid} was read")


def test_a_new_cache_reads_the_tables_a_warm_wrote(tmp_path) -> None:
    blobs = Blobs()
    base = blobs.tree({p.name: p.read_bytes() for p in STDLIB})
    store = SqliteTables(tmp_path / "symbols.db")
    first = warm_base(base, SymbolCache(store=store), blobs.load, "base")
    store.close(timeout_s=30)
    assert SqliteTables(tmp_path / "symbols.db").count() == len(first.files)

    again = SqliteTables(tmp_path / "symbols.db")
    second = warm_base(base, SymbolCache(store=again), no_reads, "base")
    assert second.names == first.names
    for path, (oid, table) in first.files.items():
        got = second.files[path][1]
        assert got == table and got.mentions == table.mentions and got is not table
    again.close()


def test_a_warm_from_scratch_writes_each_table_once(tmp_path, monkeypatch) -> None:
    """Its tables are put parsed, then again with their mentions: written once each, even
    with a writer that writes every put at once (a batch of one); a second warm's go out when
    it ends."""
    import lonca.service.symbol_store as symbol_store
    monkeypatch.setattr(symbol_store, "_BATCH", 1)
    blobs = Blobs()
    base = blobs.tree({p.name: p.read_bytes() for p in STDLIB})
    store = SqliteTables(tmp_path / "symbols.db")
    cache = SymbolCache(store=store)
    index = warm_base(base, cache, blobs.load, "base")
    answered = sum(1 for _, t in index.files.values() if t.mentions)
    assert answered > len(STDLIB) / 2      # most tables were put twice
    other = blobs.tree({"late.py": b"def late():\n    return 1\n"})
    warm_base(other, cache, blobs.load, "other")
    store.close(timeout_s=30)
    assert store.rows_written == store.count() == len(STDLIB) + 1


def test_a_table_round_trips_and_another_engine_is_not_read(tmp_path) -> None:
    blobs = Blobs()
    base = blobs.tree({"a.py": STDLIB[0].read_bytes(), "b.rs": b"fn main() { run(); }\n"})
    cache = SymbolCache()
    warm_base(base, cache, blobs.load)
    for path, entry in base.items():
        table = cache.table(path, entry.oid, lambda: b"")
        back = decode(encode(table))
        # what a warm reads of a table read back comes without making its Symbols
        assert back.defines == table.defines and back.symbol_count == table.symbol_count
        assert table_bytes(back) == table_bytes(table) and "_symbols" not in back.__dict__
        assert back == table and back.mentions == table.mentions and back.by_id.keys() == table.by_id.keys()
    row = list(pickle.loads(encode(table)))
    row[1] = SYMBOLS_ENGINE + 1
    assert decode(pickle.dumps(tuple(row))) is None

    store = SqliteTables(tmp_path / "symbols.db")
    store.put((base["a.py"].oid, "python"), cache.table("a.py", base["a.py"].oid, lambda: b""))
    store.close()
    con = sqlite3.connect(tmp_path / "symbols.db")
    with con:
        con.execute("UPDATE meta SET value = ? WHERE name = 'version'", (f"{TABLE_FORMAT}.{SYMBOLS_ENGINE - 1}",))
    assert con.execute("SELECT count(*) FROM tables").fetchone()[0] == 1
    con.close()
    reopened = SqliteTables(tmp_path / "symbols.db")
    assert reopened.count() == 0 and reopened.get((base["a.py"].oid, "python")) is None
    reopened.close()


def test_the_cache_is_bounded_by_bytes() -> None:
    blobs = Blobs()
    base = blobs.tree({p.name: p.read_bytes() for p in STDLIB})
    whole = SymbolCache()
    tables = [whole.table(p, e.oid, lambda e=e: blobs.load(e.oid)) for p, e in base.items()]
    budget = sum(table_bytes(t) for t in tables) // 3
    small = SymbolCache(max_bytes=budget)
    for p, e in base.items():
        small.table(p, e.oid, lambda e=e: blobs.load(e.oid))
        assert small.held_bytes <= budget
    assert 0 < len(small) < len(tables)
    assert whole.held_bytes == sum(table_bytes(t) for t in tables)


def test_a_first_warm_made_in_a_process_of_its_own_is_the_same(tmp_path, monkeypatch) -> None:
    import time

    import pygit2

    from bench.scale_repo import build
    from lonca.service import symbol_warmer
    from lonca.service.change_build import TreeMaps, tree_map

    monkeypatch.setattr(symbol_warmer, "ELSEWHERE", 100)
    repo = build(tmp_path / "s.git", 400)
    head = str(repo.references["refs/heads/main"].target)
    tables = SqliteTables(tmp_path / "symbols.db")
    cache = SymbolCache(store=tables)
    warmer = symbol_warmer.SymbolWarmer(cache, lambda name: pygit2.Repository(str(tmp_path / "s.git")), TreeMaps())
    warmer.ask("demo", head)
    deadline = time.monotonic() + 60
    while cache.base_index(head) is None:
        assert time.monotonic() < deadline, "the warm did not end"
        time.sleep(0.05)
    warmer.close()
    assert tables.count() == 400 and cache.misses == 0     # parsed by the other process, read back here
    got = cache.base_index(head)
    want = warm_base(tree_map(repo, repo.get(head).tree), SymbolCache(), lambda oid: repo[oid].data)
    assert got.names == want.names
    for path, (oid, table) in want.files.items():
        assert got.files[path][0] == oid
        assert {n: set(m) for n, m in got.files[path][1].mentions.items()} == \
            {n: set(m) for n, m in table.mentions.items()}
    tables.close()


def test_a_warm_from_scratch_knows_when_the_tables_on_disk_hold_the_tree(tmp_path) -> None:
    """A restart's warm reads the tables back itself instead of having a process of its own
    read them too (symbol_warmer._on_disk), and only then."""
    import pygit2

    from lonca.service.change_build import TreeMaps, tree_map
    from lonca.service.symbol_warmer import SymbolWarmer
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    index = pygit2.Index()
    for n, p in enumerate(STDLIB[:12]):
        index.add(pygit2.IndexEntry(f"pkg/m{n}.py", repo.create_blob(p.read_bytes()), pygit2.GIT_FILEMODE_BLOB))
    files = tree_map(repo, repo[index.write_tree(repo)])
    store = SqliteTables(tmp_path / "symbols.db")
    cache = SymbolCache(store=store)
    warmer = SymbolWarmer(cache, lambda name: repo, TreeMaps())
    try:
        assert not warmer._on_disk(files)
        warm_base(files, cache, lambda oid: repo[oid].data)
        assert warmer._on_disk(files)
        store.close(timeout_s=30)
        again = SqliteTables(tmp_path / "symbols.db")      # a restart
        assert SymbolWarmer(SymbolCache(store=again), lambda name: repo, TreeMaps())._on_disk(files)
        again.close()
    finally:
        warmer.close()
        store.close()
