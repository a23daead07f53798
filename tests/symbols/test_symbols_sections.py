"""Sections (issue 11): every Markdown heading, ATX or setext, is a section nested by level, and
the ids of Markdown, TOML, JSON and YAML files are unique whatever the names hold (dots, names
alike, `~`, `<file>`, `<append>`, empty names)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lonca.symbols import FileSymbols, symbol_table
from symtrees import facts

SETTINGS = settings(max_examples=150, deadline=None)
# pieces of names: dots that spell nesting, the seed's `~N`, the table's reserved names
PIECES = ["Release", "a", "b", "1", "2", ".", " ", "~", "~2", "<file>", "<append>", "(untitled)",
          "é", '"']
NAMES = st.lists(st.sampled_from(PIECES), max_size=5).map("".join)


def sections(fs: FileSymbols) -> list:
    return [s for s in fs.symbols if s.kind in ("section", "key")]


def assert_unique(fs: FileSymbols) -> None:
    """Ids unique, none the file's own or a section's `<append>`, every parent a symbol."""
    ids = [s.id for s in fs.symbols]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    own = sections(fs)
    assert f"{fs.path}#<file>" not in {s.id for s in own}
    appends = {f"{s.id}.<append>" for s in own if s.kind == "section"}
    assert not appends & {s.id for s in own}
    qualified = {s.qualified for s in own}
    for s in own:
        assert s.parent is None or s.parent in qualified
        assert s.id == f"{fs.path}#{s.qualified}"
        assert s.parent is None or s.qualified.startswith(f"{s.parent}.")


# --- Markdown ---------------------------------------------------------------------------------

def _setext_name(name: str) -> str:
    """A paragraph line that stays a paragraph: a letter first (not a tag, fence or marker)."""
    name = name.strip()
    return name if name[:1].isalpha() else "S" + name


HEADINGS = st.tuples(st.sampled_from(["atx", "setext"]), st.integers(1, 6), NAMES)
BLOCKS = st.lists(st.one_of(HEADINGS, st.sampled_from(["text", "Release.1.2 notes", "- item"])),
                  max_size=14)


def markdown(blocks: list) -> tuple[bytes, list[tuple[int, str]]]:
    """The document and its headings as (level, expected name)."""
    out, headings = [], []
    for block in blocks:
        if isinstance(block, str):
            out.append(block)
            continue
        style, level, name = block
        if style == "atx":
            out.append("#" * level + " " + name)
        else:
            level = 1 if level % 2 else 2
            name = _setext_name(name)
            out.append(name + "\n" + ("===" if level == 1 else "---"))
        headings.append((level, " ".join(name.split()) or "(untitled)"))
    return "\n\n".join(out).encode() + b"\n", headings


@SETTINGS
@given(BLOCKS)
def test_every_heading_is_one_section_nested_by_level_with_a_unique_id(blocks) -> None:
    data, headings = markdown(blocks)
    fs = symbol_table("R.md", data)
    assert fs.status == "parsed"
    assert_unique(fs)
    got = sections(fs)        # depth first: file order
    assert [s.name for s in got] == [name for _, name in headings]
    open_: list[tuple[int, str]] = []
    for (level, _), s in zip(headings, got):
        while open_ and open_[-1][0] >= level:
            open_.pop()
        assert s.parent == (open_[-1][1] if open_ else None)
        open_.append((level, s.qualified))


def test_setext_headings_after_the_first_are_sections() -> None:
    """A changelog underlined with `===`/`---`: one section per release, so two agents editing
    different release notes need different leases."""
    releases = "".join(f"1.{n}\n---\n\n- fix {n}\n\n" for n in range(40, 0, -1))
    data = f"Changelog\n=========\n\nAll changes.\n\n{releases}".encode()
    fs = symbol_table("CHANGES.md", data)
    ids = [s.id for s in sections(fs)]
    assert ids[:3] == ["CHANGES.md#Changelog", "CHANGES.md#Changelog.1.40",
                       "CHANGES.md#Changelog.1.39"]
    assert len(ids) == 41
    one = fs.by_id["CHANGES.md#Changelog.1.1"]     # the last: five lines from line 201
    assert (one.parent, one.start_line, one.end_line) == ("Changelog", 201, 205)
    f = facts({"CHANGES.md": data}, {"CHANGES.md": data.replace(b"- fix 7\n", b"- fox 7\n")})
    assert f["edits"] == ["CHANGES.md#Changelog.1.7"]


def test_atx_and_setext_nest_together() -> None:
    data = b"# A\n\nB\n---\n\n### C\n\nD\n===\n\n## E\n\nF\n-\n"
    fs = symbol_table("m.md", data)
    assert [(s.qualified, s.parent) for s in sections(fs)] == [
        ("A", None), ("A.B", "A"), ("A.B.C", "A.B"), ("D", None), ("D.E", "D"), ("D.F", "D")]


def test_a_dotted_heading_and_nested_headings_are_two_ids() -> None:
    """`R.md#Release.1.2` named two sections: the later one in file order is numbered."""
    data = b"# Release.1.2\n\nflat\n\n# Release\n\n## 1\n\n### 2\n\nnested\n"
    fs = symbol_table("R.md", data)
    assert [s.qualified for s in sections(fs)] == [
        "Release.1.2", "Release", "Release.1", "Release.1.2~2"]
    nested = fs.by_id["R.md#Release.1.2~2"]
    assert (nested.name, nested.parent, nested.start_line) == ("2", "Release.1", 9)
    f = facts({"R.md": data}, {"R.md": data.replace(b"nested", b"changed")})
    assert f["edits"] == ["R.md#Release.1.2~2"]


def test_headings_named_file_or_append_are_numbered() -> None:
    fs = symbol_table("R.md", b"# <file>\n\n# S\n\n## <append>\n\nx\n")
    assert [s.qualified for s in sections(fs)] == ["<file>~2", "S", "S.<append>~2"]
    assert_unique(fs)


def test_names_alike_count_on_from_the_last_number() -> None:
    fs = symbol_table("R.md", b"# x~2\n\n# x\n\n# x\n\n# \n\n# (untitled)\n")
    assert [s.qualified for s in sections(fs)] == ["x~2", "x", "x~3", "(untitled)",
                                                   "(untitled)~2"]


# --- TOML, JSON, YAML -------------------------------------------------------------------------

TOML_KEYS = st.sampled_from(["a", "b", "a.b", "serde", "dependencies", "dependencies.serde",
                             '"a.b"', '"<file>"', '""', '"~2"', '"a~2"'])


@SETTINGS
@given(st.lists(st.tuples(TOML_KEYS, st.integers(0, 9)), max_size=4),
       st.lists(st.tuples(st.booleans(), TOML_KEYS,
                          st.lists(st.tuples(TOML_KEYS, st.integers(0, 9)), max_size=4)),
                max_size=5))
def test_toml_ids_are_unique(top, tables) -> None:
    lines = [f"{k} = {v}" for k, v in top]
    for array, name, pairs in tables:
        lines.append(f"[[{name}]]" if array else f"[{name}]")
        lines += [f"{k} = {v}" for k, v in pairs]
    fs = symbol_table("Cargo.toml", ("\n".join(lines) + "\n").encode())
    assert fs.status == "parsed"
    assert_unique(fs)
    assert len(sections(fs)) == len(top) + sum(1 + len(p) for _, _, p in tables)


JSON_KEYS = st.sampled_from(["a", "b", "a.b", ".", "", "<file>", "<append>", "~2", "a~2", "é"])
MAPPINGS = st.recursive(
    st.lists(st.tuples(JSON_KEYS, st.integers(0, 9)), max_size=4),
    lambda inner: st.lists(st.tuples(JSON_KEYS, st.one_of(st.integers(0, 9), inner)),
                           max_size=4),
    max_leaves=20)


def count_pairs(pairs: list) -> int:
    return sum(1 + (count_pairs(v) if isinstance(v, list) else 0) for _, v in pairs)


def to_json(pairs: list) -> str:
    """Keys may repeat, which a dict can not hold."""
    return "{" + ", ".join(f"{json.dumps(k)}: {to_json(v) if isinstance(v, list) else v}"
                           for k, v in pairs) + "}"


def to_yaml(pairs: list, indent: int = 0) -> str:
    out = []
    for k, v in pairs:
        key = k if k and k[0].isalpha() or k in (".", "<file>", "<append>", "~2") else json.dumps(k)
        if isinstance(v, list) and v:
            out.append(" " * indent + f"{key}:\n" + to_yaml(v, indent + 2))
        else:
            out.append(" " * indent + f"{key}: {'{}' if isinstance(v, list) else v}\n")
    return "".join(out)


@SETTINGS
@given(MAPPINGS)
def test_json_ids_are_unique(pairs) -> None:
    fs = symbol_table("package.json", to_json(pairs).encode())
    assert fs.status == "parsed"
    assert_unique(fs)
    assert len(sections(fs)) == count_pairs(pairs)


@SETTINGS
@given(MAPPINGS.filter(bool))
def test_yaml_ids_are_unique(pairs) -> None:
    fs = symbol_table("ci.yaml", to_yaml(pairs).encode())
    assert fs.status == "parsed"
    assert_unique(fs)
    assert len(sections(fs)) == count_pairs(pairs)


def test_a_dotted_key_beside_nested_keys_is_two_ids() -> None:
    """JSON/YAML `"a.b"` beside `a -> b`; TOML `[dependencies.serde]` beside the key `serde` of
    `[dependencies]`."""
    js = symbol_table("p.json", b'{"a.b": 1, "a": {"b": 2, "b": 3}}')
    assert [s.qualified for s in sections(js)] == ["a.b", "a", "a.b~2", "a.b~3"]
    ym = symbol_table("c.yaml", b"a:\n  b: 2\na.b: 1\n")
    assert [s.qualified for s in sections(ym)] == ["a", "a.b", "a.b~2"]
    tm = symbol_table("Cargo.toml", b'[dependencies]\nserde = "1"\n\n[dependencies.serde]\n'
                                    b'features = ["x"]\n')
    assert [s.qualified for s in sections(tm)] == [
        "dependencies", "dependencies.serde", "dependencies.serde~2",
        "dependencies.serde~2.features"]
    f = facts({"c.yaml": b"a:\n  b: 2\na.b: 1\n"}, {"c.yaml": b"a:\n  b: 2\na.b: 5\n"})
    assert f["edits"] == ["c.yaml#a.b~2"]


# --- hostile documents ------------------------------------------------------------------------

HOSTILE = {
    "nul.md": b"# a\0b\n\ntext\n",
    "surrogate.md": "# a\ud800b\n".encode("utf-8", "surrogatepass"),
    "replaced.md": "# a\ud800b\n".encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode(),
    "surrogate.json": b'{"\\ud800": 1, "\\ud800": {"\\udc00": 2}}',
    "deep.json": b'{"a":' * 1000 + b"1" + b"}" * 1000,
    "deep_array.json": b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}",
    "flow.yaml": b"a: " + b"{b: " * 1000 + b"1" + b"}" * 1000 + b"\n",
    "anchors.yaml": b"a: &x {b: 1}\nc: *x\n<<: *x\n---\na.b: 2\n",
    "deep.toml": b"a = " + b"[" * 1000 + b"]" * 1000 + b"\n",
    "inline.toml": b"a = " + b"{b = " * 500 + b"1" + b"}" * 500 + b"\n",
    "dotted.toml": b"[a.b]\n[a]\nb.c = 1\n[\"a.b\"]\n[[a.b]]\n",
    "crlf.md": b"A\r\n===\r\n\r\nB\r\n---\r\nx\r\n",
    "bom.md": b"\xef\xbb\xbfTitle\n=====\n",
    "bom.json": b'\xef\xbb\xbf{"a": 1}',
    "underlines.md": b"===\n---\n===\n",
    "html.md": b"<file>\n======\n\n# <file>\n\n<append>\n---\n",
    "fence.md": b"```\n# not\nA\n===\n```\n\nB\n---\n",
    "empty.md": b"", "empty.json": b"", "empty.yaml": b"", "empty.toml": b"",
    "huge_key.json": b'{"' + b"a." * 200_000 + b'": 1}',
    "many.md": b"".join(b"#" * (1 + i % 6) + b" h.%d\n" % (i % 3) for i in range(1000)),
    "setext_many.md": b"".join(b"R.%d\n---\n\n" % (i % 3) for i in range(1000)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_documents_give_a_table(name: str) -> None:
    fs = symbol_table(name, HOSTILE[name], timeout_s=5.0)
    assert fs.status in ("parsed", "unread")
    assert fs.symbols[-1].id == f"{name}#<file>"
    assert_unique(fs)


# Each of these writes past tree-sitter's state buffer in its grammar's scanner and kills the
# process: they run in a child, so that a crash is this test failing, not the test run ending.
CRASHERS = {
    "block.yaml": "b''.join(b'  ' * i + b'k%d:\\n' % i for i in range(300)) + b'  ' * 300 + b'v'",
    "dashes.yaml": "b'- ' * 300 + b'x\\n'",
    "quotes.md": "b'>' * 300",
    "lists.md": "b''.join(b'  ' * i + b'- x\\n' for i in range(300))",
    "markers.md": "b'- ' * 300 + b'x\\n'",
    "lists_cr.md": "b''.join(b'  ' * i + b'- x\\r' for i in range(300))",
    "block_cr.yaml": "b''.join(b'  ' * i + b'k%d:\\r' % i for i in range(300))",
    "deep.py": "b''.join(b' ' * i + b'if 1:\\n' for i in range(600)) + b' ' * 600 + b\"'a'\"",
    # Kotlin's scanner aborts past 1 024 strings open
    "templates.kt": "b'val x = ' + b'\"${' * 1100 + b'1' + b'}\"' * 1100 + b'\\n'",
}
NEAR = {     # as deep as a grammar reads safely: still parsed
    "block.yaml": "b''.join(b'  ' * i + b'k%d:\\n' % i for i in range(90)) + b'  ' * 90 + b'v'",
    "quotes.md": "b'>' * 150 + b' x'",
    "deep.py": "b''.join(b' ' * i + b'if 1:\\n' for i in range(300)) + b' ' * 300 + b'a'",
    "templates.kt": "b'val x = ' + b'\"${' * 900 + b'1' + b'}\"' * 900 + b'\\n'",
}


def test_nesting_past_a_scanner_buffer_is_unread_not_a_crash() -> None:
    lines = [f"fs = symbol_table({name!r}, {expr}, timeout_s=10.0)\n"
             f"print({name!r}, fs.status, fs.syntax_errors[:1], flush=True)"
             for name, expr in list(CRASHERS.items()) + [(f"near/{n}", e) for n, e in NEAR.items()]]
    code = "from lonca.symbols import symbol_table\n" + "\n".join(lines)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-2000:])
    out = run.stdout.splitlines()
    for name in CRASHERS:
        assert any(line.startswith(f"{name} unread") and "nested too deep" in line
                   for line in out), out
    for name in NEAR:
        assert any(line.startswith(f"near/{name} parsed") for line in out), out


@pytest.mark.parametrize("ext", [".md", ".json", ".yaml", ".toml"])
def test_facts_between_hostile_documents(ext: str) -> None:
    """Facts from each hostile document of a language to each other one, at one path."""
    docs = [data for name, data in sorted(HOSTILE.items()) if name.endswith(ext)]
    for old in docs:
        for new in docs:
            f = facts({"f" + ext: old}, {"f" + ext: new})
            ids = f["edits"] + f["adds"] + f["deletes"]
            assert len(ids) == len(set(ids))
            assert (f["modified_files"] == []) == (old == new)
