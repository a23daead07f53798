"""Mentions answered ahead of time for a whole base (warm_base) are those a scan finds."""
from __future__ import annotations

import pathlib
import random
import sysconfig

from symtrees import Blobs

from lonca.symbols import SymbolCache, compute_facts, warm_base
from lonca.symbols.mentions import base_tables, mentioning
from lonca.symbols.table import NOT_NAMES

STDLIB = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:120]


def test_warm_mentions_are_the_scanned_ones() -> None:
    blobs = Blobs()
    base = blobs.tree({p.name: p.read_bytes() for p in STDLIB} | {"link": b"target"},
                      {"link": "120000"})
    warm, cold = SymbolCache(), SymbolCache()
    assert len(warm_base(base, warm, blobs.load).files) > 100
    tables = dict(base_tables(base, warm, blobs.load))
    names = sorted({s.name for t in tables.values() for s in t.symbols if s.kind not in NOT_NAMES})
    sample = random.Random(3).sample(names, 300) + [n for n in ("__init__", "main") if n in names]
    for oid, table in base_tables(base, cold, blobs.load):
        warmed = tables[oid]
        for name in sample:
            if name in table.names:
                assert name in warmed.mentions     # answered ahead of time
                assert mentioning(table, {name}, lambda: blobs.load(oid)) == \
                    set(warmed.mentions[name]), (table.path, name)


def test_facts_on_a_warm_base_are_the_same() -> None:
    blobs = Blobs()
    files = {p.name: p.read_bytes() for p in STDLIB[:60]}
    base = blobs.tree(files)
    changed = dict(files)
    for name in sorted(files)[::7]:
        changed[name] = files[name].replace(b"def ", b"def renamed_", 1).replace(
            b"(self", b"(self, extra=None", 1)
    new = blobs.tree(changed)
    warm = SymbolCache()
    warm_base(base, warm, blobs.load)
    got = compute_facts(base, new, blobs.load, warm).to_json()
    assert got["affected"]
    assert got == compute_facts(base, new, blobs.load, SymbolCache()).to_json()
