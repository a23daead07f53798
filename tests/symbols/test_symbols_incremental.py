"""A blob parsed incrementally from the kept tree of the blob it replaces, or spliced from its
table, gives the table a cold parse gives."""
from __future__ import annotations

import hashlib
import pathlib
import sysconfig

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from symtrees import same_table

from lonca.symbols import SymbolCache, symbol_table
from lonca.symbols import cache as cache_module
from lonca.symbols import table as table_module

GOLDEN = pathlib.Path(__file__).parent / "golden"
SOURCES = {p.name: p.read_bytes() for p in sorted(GOLDEN.iterdir()) if p.suffix != ".txt"}
STDLIB = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[::8]
PIECES = st.sampled_from([b"\n", b" ", b"    ", b"x", b"(", b")", b"{", b"}", b":", b";", b",",
                          b"def f(a):\n    return a\n", b"\xc3\xa9", b"# note\n", b"'", b'"',
                          b"class C:\n    pass\n", b"fn g() {}\n", b"- item\n", b"[x]\n"])


def oid(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


@pytest.fixture
def incremental_parses(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each parse through the cache started from an old tree."""
    seen: list[bool] = []
    real = table_module.parse_bounded

    def spy(language, data, limit_s=None, old=None):
        seen.append(old is not None)
        return real(language, data, limit_s, old)

    monkeypatch.setattr(table_module, "parse_bounded", spy)
    return seen


def edits_agree(path: str, versions: list[bytes]) -> None:
    """Each version, parsed from the tree of the one before, matches its cold table."""
    cold = [symbol_table(path, data) for data in versions]
    cache = SymbolCache()
    previous = None
    for data, expected in zip(versions, cold):
        assert same_table(cache.table(path, oid(data), lambda data=data: data, previous), expected)
        previous = oid(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SOURCES)), st.lists(st.tuples(
    st.floats(0, 1), st.integers(0, 40), st.lists(PIECES, max_size=4)), min_size=1, max_size=3))
def test_incremental_tables_equal_cold_ones(name: str, edits: list) -> None:
    versions = [SOURCES[name]]
    for where, cut, pieces in edits:
        data = versions[-1]
        at = int(where * len(data))
        versions.append(data[:at] + b"".join(pieces) + data[at + cut:])
    edits_agree(name, versions)


@pytest.mark.parametrize("source", STDLIB, ids=lambda p: p.name)
def test_stdlib_edits_parse_incrementally_and_match(source: pathlib.Path,
                                                    incremental_parses: list[bool],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept-tree path alone: the splice, tried first, is turned off here."""
    monkeypatch.setattr(cache_module, "spliced_table", lambda *_: None)
    data = source.read_bytes()
    lines = data.split(b"\n")
    at = next((i for i, line in enumerate(lines) if line.startswith(b"def ")), len(lines) // 2)
    body = lines[:at + 1] + [b"    bench_value = 1"] + lines[at + 1:]
    renamed = data.replace(b"def ", b"def x_", 1)
    signature = data.replace(b"(self", b"(self, extra=None", 1)
    shorter = b"\n".join(lines[:len(lines) // 3] + lines[len(lines) // 3 + 5:])
    edits_agree(source.name, [data, b"\n".join(body), renamed, signature, shorter, data + b"\n"])
    cached = incremental_parses[6:]     # after the 6 cold parses, those through the cache
    assert cached[0] is False and len(cached) > 1 and all(cached[1:])
