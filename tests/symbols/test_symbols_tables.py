"""Symbol tables: goldens per language, hashes, keys, and bad input."""
from __future__ import annotations

import os
import pathlib
import time

import pytest

from lonca.symbols import MAX_FILE_BYTES, language_of, symbol_table
from lonca.symbols.parsing import parse_bounded

GOLDEN = pathlib.Path(__file__).parent / "golden"
SOURCES = sorted(p for p in GOLDEN.iterdir() if p.suffix != ".txt")


def render(path: str, data: bytes) -> str:
    fs = symbol_table(path, data)
    out = [f"status {fs.status}"] + [f"error {e}" for e in fs.syntax_errors]
    for s in fs.symbols:
        flags = " test" * s.test + " skipped" * s.skipped
        out.append(f"{s.id} | {s.kind} | parent={s.parent} | {s.start_line}-{s.end_line}{flags}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_golden(source: pathlib.Path) -> None:
    got = render(source.name, source.read_bytes())
    expected = source.with_name(source.name + ".txt")
    if os.environ.get("LONCA_REGOLD"):
        expected.write_text(got)
    assert got == expected.read_text()


def test_every_language_has_a_golden() -> None:
    covered = {language_of(p.name) for p in SOURCES}
    assert covered >= {"python", "javascript", "typescript", "rust", "go", "java", "csharp",
                       "c", "cpp", "ruby", "php", "kotlin", "swift", "scala", "markdown",
                       "toml", "json", "yaml"}


CODE = [p for p in SOURCES if language_of(p.name) not in ("markdown", "yaml")]


@pytest.mark.parametrize("source", CODE, ids=lambda p: p.name)
def test_parse_error_makes_the_file_unread(source: pathlib.Path) -> None:
    lines = source.read_bytes().split(b"\n")
    mid = len(lines) // 2
    bad = b"\n".join(lines[:mid] + [b'  ) ( } { ] [ @@@ ::: ;;; <<< "open'] + lines[mid:])
    fs = symbol_table(source.name, bad)
    assert fs.status == "unread"
    assert fs.syntax_errors and fs.syntax_errors[0].startswith(source.name + ":")
    assert [s.id for s in fs.symbols] == [f"{source.name}#<file>"]


def table(path: str, src: str):
    return {s.qualified: s for s in symbol_table(path, src.encode()).symbols}


def test_ids_kinds_and_parents() -> None:
    t = table("src/a.py", "class Client:\n    def charge(self):\n        pass\n")
    charge = t["Client.charge"]
    assert charge.id == "src/a.py#Client.charge"
    assert (charge.name, charge.kind, charge.parent) == ("charge", "method", "Client")
    assert (charge.start_line, charge.end_line) == (2, 3)
    assert t["Client.<def>"].kind == "def" and t["Client.<def>"].parent == "Client"
    assert t["Client"].def_hash == t["Client.<def>"].body_hash
    assert t["<file>"].id == "src/a.py#<file>"


def test_byte_offsets_are_utf8() -> None:
    src = "s = 'ğüş'\ndef f():\n    return 'ç'\n"
    f = table("a.py", src)["f"]
    data = src.encode()
    assert data[f.start_byte:f.end_byte] == "def f():\n    return 'ç'".encode()


def test_signature_ignores_wrapping_but_not_parameters() -> None:
    a = table("a.py", "def f(a, b):\n    return a\n")["f"]
    wrapped = table("a.py", "def f(\n    a,\n    b,\n):\n    return a\n")["f"]
    wider = table("a.py", "def f(a, b, c):\n    return a\n")["f"]
    body = table("a.py", "def f(a, b):\n    return b\n")["f"]
    assert a.signature_hash != wider.signature_hash
    assert a.body_hash != body.body_hash
    assert a.signature_hash == body.signature_hash
    # trailing comma added: the text differs, so this is a new signature
    assert wrapped.signature_hash != a.signature_hash


def test_def_hash_is_own_text_apart_from_methods() -> None:
    base = table("a.py", "class C:\n    x = 1\n\n    def m(self):\n        return 1\n")
    method_changed = table("a.py", "class C:\n    x = 1\n\n    def m(self):\n        return 2\n")
    field_changed = table("a.py", "class C:\n    x = 2\n\n    def m(self):\n        return 1\n")
    method_added = table("a.py", "class C:\n    x = 1\n\n    def m(self):\n        return 1\n\n"
                                 "    def n(self):\n        return 3\n")
    assert base["C"].def_hash == method_changed["C"].def_hash == method_added["C"].def_hash
    assert base["C"].def_hash != field_changed["C"].def_hash


def test_rust_def_holds_impl_headers() -> None:
    a = table("a.rs", "struct S;\nimpl S {\n    fn f() {}\n}\n")
    b = table("a.rs", "struct S;\nimpl<T> S where T: Copy {\n    fn f() {}\n}\n")
    c = table("a.rs", "struct S;\nimpl S {\n    fn f() { g() }\n}\n")
    assert a["S"].def_hash != b["S"].def_hash
    assert a["S"].def_hash == c["S"].def_hash
    assert a["S.f"].body_hash != c["S.f"].body_hash


def test_overload_keys_only_when_names_collide() -> None:
    java = table("A.java", "class A { void m(int a) {} void m(String s, int b) {} void n() {} }")
    assert {"A.m(int)", "A.m(String,int)", "A.n"} <= set(java)
    cpp = table("a.cpp", "struct S { void f(const std::string& s) {} void f(int *p = 0) {} };")
    assert {"S.f(const std::string&)", "S.f(int *)"} <= set(cpp)
    same = table("a.py", "def init():\n    pass\n\ndef init():\n    pass\n\ndef init():\n    pass\n")
    assert {"init", "init~2", "init~3"} <= set(same)


def test_test_detection() -> None:
    t = table("t.py", "def test_a():\n    pass\n\n@unittest.skip('x')\ndef test_b():\n    pass\n\n"
                      "def helper():\n    pass\n")
    assert (t["test_a"].test, t["test_a"].skipped) == (True, False)
    assert (t["test_b"].test, t["test_b"].skipped) == (True, True)
    assert not t["helper"].test


def test_sections_append_and_nesting() -> None:
    t = table("README.md", "# A\n\nintro\n\n## B\n\ntext\n\n### C\n\nmore\n")
    assert {"A", "A.B", "A.B.C"} <= set(t)
    assert t["A.B.C"].parent == "A.B"
    edited_sub = table("README.md", "# A\n\nintro\n\n## B\n\ntext\n\n### C\n\nless\n")
    assert edited_sub["A.B"].body_hash == t["A.B"].body_hash
    assert edited_sub["A.B.C"].body_hash != t["A.B.C"].body_hash


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("data, why", [
    (b"def f():\n    return '\0'\n", "NUL"),
    (b"def f():\n    return '\xff\xfe'\n", "UTF-8"),
])
def test_binary_and_invalid_utf8_code_is_unread(data: bytes, why: str) -> None:
    fs = symbol_table("a.py", data)
    assert fs.status == "unread"
    assert why in fs.syntax_errors[0]


def test_text_without_grammar_is_unparsed() -> None:
    fs = symbol_table("notes/todo.txt", b"one\ntwo\n")
    assert (fs.status, fs.line_count, [s.id for s in fs.symbols]) == (
        "unparsed", 2, ["notes/todo.txt#<file>"])
    assert symbol_table("Makefile", b"all:\n\ttrue\n").status == "unparsed"
    assert symbol_table("img.png", b"\x89PNG\0\0").line_count == 0


def test_over_8_mib_is_unread_without_parsing() -> None:
    data = b"x = 1\n" * (MAX_FILE_BYTES // 6 + 1)
    started = time.monotonic()
    fs = symbol_table("big.py", data)
    assert fs.status == "unread" and "over" in fs.syntax_errors[0]
    assert time.monotonic() - started < 1.0


def test_parse_time_limit_aborts() -> None:
    data = b"def f():\n    return 1\n" * 50_000
    assert parse_bounded("python", data, limit_s=0.0) is None
    assert parse_bounded("python", data) is not None
    fs = symbol_table("slow.py", data, timeout_s=0.0)
    assert fs.status == "unread" and "timed out" in fs.syntax_errors[0]


@pytest.mark.parametrize("path, data", [
    ("deep.py", b"x = " + b"(" * 50_000 + b"1" + b")" * 50_000 + b"\n"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000),
    ("deep2.json", b'{"a":' * 20_000 + b"1" + b"}" * 20_000),
    ("deep.yaml", b"".join(b"  " * i + b"k:\n" for i in range(3000)) + b"  " * 3000 + b"v\n"),
    ("deep.md", b"".join(b"#" * (1 + i % 6) + b" h%d\n\n" % i for i in range(5000))),
    ("deep.rs", b"mod a {\n" * 3000 + b"}\n" * 3000),
    ("nested.py", b"".join(b"    " * i + b"class C%d:\n" % i for i in range(500))
     + b"    " * 500 + b"pass\n"),
])
def test_pathological_nesting_never_crashes(path: str, data: bytes) -> None:
    fs = symbol_table(path, data, timeout_s=5.0)
    assert fs.status in ("parsed", "unread")
    assert fs.symbols[-1].id == f"{path}#<file>"


def test_kotlin_templates_past_what_its_scanner_survives_nested_are_unread() -> None:
    """Kotlin's scanner dies past 1 024 strings nested, which only `${` can nest: 1 000 of them,
    even one after the other, are not given to the grammar; 999 are."""
    many = b"".join(b'fun f%d() = "${%d}"\n' % (i, i) for i in range(1000))
    fs = symbol_table("many.kt", many)
    assert fs.status == "unread" and "nested too deep" in fs.syntax_errors[0]
    fs = symbol_table("fewer.kt", many[:many.rindex(b"fun ")])
    assert fs.status == "parsed" and len(fs.symbols) == 1000


def test_every_grammar_loads() -> None:
    for lang in ("python", "rust", "go", "typescript", "tsx", "javascript", "java", "csharp", "c",
                 "cpp", "ruby", "php", "kotlin", "swift", "scala", "markdown", "toml", "json",
                 "yaml"):
        assert parse_bounded(lang, b"") is not None
