"""Properties of the facts, over the golden sources of every language."""
from __future__ import annotations

import pathlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lonca.symbols import SymbolCache, language_of, symbol_table
from symtrees import facts

GOLDEN = pathlib.Path(__file__).parent / "golden"
SOURCES = {p.name: p.read_bytes() for p in sorted(GOLDEN.iterdir()) if p.suffix != ".txt"}
CODE = {name: data for name, data in SOURCES.items()
        if language_of(name) not in ("markdown", "toml", "json", "yaml")
        and symbol_table(name, data).status == "parsed"}
COMMENT = {"python": b"#", "ruby": b"#"}
CACHE = SymbolCache()
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 _", min_size=1, max_size=30)
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def bodies(name: str) -> list[tuple[str, int]]:
    """(id, byte offset of a line start inside the body) for functions whose body spans lines."""
    data = CODE[name]
    out = []
    for s in symbol_table(name, data).symbols:
        if not s.is_function or s.sig_end >= s.end_byte:
            continue
        first_break = data.find(b"\n", s.sig_end, s.end_byte)
        last_break = data.rfind(b"\n", s.sig_end, s.end_byte)
        if language_of(name) == "python":     # the body starts at its first statement
            line_start = data.rfind(b"\n", 0, s.sig_end) + 1
            if data[line_start:s.sig_end].strip() == b"":
                out.append((s.id, line_start))
        elif first_break != -1 and first_break != last_break:
            out.append((s.id, first_break + 1))
    return out


EDITABLE = {name: bodies(name) for name in CODE if bodies(name)}


@SETTINGS
@given(st.dictionaries(st.sampled_from(sorted(SOURCES)), st.just(True), max_size=len(SOURCES)),
       st.sampled_from(["", "src/", "a/b/"]))
def test_a_tree_against_itself_has_no_facts(chosen: dict[str, bool], prefix: str) -> None:
    tree = {prefix + name: SOURCES[name] for name in chosen}
    f = facts(tree, tree, CACHE)
    assert all(not v for k, v in f.items() if k != "tests")
    assert not any(f["tests"].values())


@SETTINGS
@given(st.data())
def test_an_edit_inside_one_body_is_exactly_that_edit(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(EDITABLE)))
    symbol, offset = data.draw(st.sampled_from(EDITABLE[name]))
    word = data.draw(WORDS).encode()
    src = CODE[name]
    line_end = src.find(b"\n", offset)
    line = src[offset:line_end]
    indent = line[:len(line) - len(line.lstrip())]
    marker = COMMENT.get(language_of(name), b"//")
    if language_of(name) == "python" and data.draw(st.booleans()):
        added = indent + b"_v = '" + word + b"'\n"
    else:
        added = indent + marker + b" " + word + b"\n"
    f = facts({name: src}, {name: src[:offset] + added + src[offset:]}, CACHE)
    assert f["edits"] == [symbol]
    assert f["adds"] == f["deletes"] == f["renames"] == f["signature_changes"] == []
    assert (f["lines_added"], f["lines_removed"]) == (1, 0)
    assert f["unread_files"] == [] and f["import_only_files"] == []


@SETTINGS
@given(st.sets(st.sampled_from(sorted(SOURCES))), st.sets(st.sampled_from(sorted(SOURCES))))
def test_facts_swap_when_the_trees_swap(one: set[str], two: set[str]) -> None:
    a = {name: SOURCES[name] for name in one}
    b = {name: SOURCES[name] for name in two}
    forward, backward = facts(a, b, CACHE), facts(b, a, CACHE)
    assert forward["adds"] == backward["deletes"]
    assert forward["added_files"] == backward["deleted_files"]
    assert forward["lines_added"] == backward["lines_removed"]


@SETTINGS
@given(st.sampled_from(sorted({"x.py", "x.rs", "x.go", "x.ts", "x.tsx", "x.js", "x.java",
                               "x.cs", "x.c", "x.cpp", "x.rb", "x.php", "x.kt", "x.swift",
                               "x.scala", "x.md", "x.toml", "x.json", "x.yaml", "x.txt"})),
       st.one_of(st.binary(max_size=400),
                 st.text(alphabet="{}()[]<>:;,.=\"'#/\\\n\t abcdefxyz_0123456789@$-*",
                         max_size=400).map(str.encode)))
def test_any_bytes_give_a_table(path: str, data: bytes) -> None:
    fs = symbol_table(path, data)
    assert fs.status in ("parsed", "unparsed", "unread")
    assert fs.symbols[-1].id == f"{path}#<file>"
    assert all(0 <= s.start_byte <= s.end_byte <= len(data) for s in fs.symbols)
