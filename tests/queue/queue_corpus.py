"""The merge scenario corpus: a base, trunk's version (ours), the change's version (theirs) and
the expected result.

Most versions are made by text edits of the base, and the expected merge is the base with both
sides' edits applied: an oracle that does not depend on the merge code. `git` says what
libgit2's line merge alone does with the file ("clean" or "conflict"), and the tests check it,
so a scenario that claims to need the symbol merge really does.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Scenario:
    name: str
    path: str
    base: bytes | None              # None: the file is new on both sides
    ours: bytes | None              # None: trunk deleted it
    theirs: bytes | None            # None: the change deleted it
    git: str                        # "clean" | "conflict": libgit2's line merge of this file
    merged: bytes | None = None     # expected content when the merge succeeds
    conflicts: list[str] = field(default_factory=list)
    marked: list[bytes] = field(default_factory=list)   # lines conflict_text must hold

    @property
    def language(self) -> str:
        return self.path.rsplit(".", 1)[-1]


def sub(text: bytes, *pairs: tuple[bytes, bytes]) -> bytes:
    for old, new in pairs:
        assert text.count(old) == 1, (old, text)
        text = text.replace(old, new)
    return text


def edits(name, path, base, ours_edits, theirs_edits, git, on_ours=None) -> Scenario:
    """Both sides edit the base; the merge is expected to hold both edits: the change's edits
    applied to trunk's text (`on_ours` restates them where trunk's text moved the anchor, as
    for imports, where trunk's additions come first)."""
    ours = sub(base, *ours_edits)
    theirs = sub(base, *theirs_edits)
    return Scenario(name, path, base, ours, theirs, git, merged=sub(ours, *(on_ours or theirs_edits)))


def clash(name, path, base, ours, theirs, git, conflicts, marked=()) -> Scenario:
    return Scenario(name, path, base, ours, theirs, git, conflicts=conflicts, marked=list(marked))


PY = b'''import os


def f(x):
    y = x + 1
    return y


def g(x):
    z = x * 2
    return z


class C:
    def m(self):
        return 1
    def n(self):
        return 2


def h():
    return os.sep
'''

PY_JSON = PY.replace(b"import os\n", b"import os\nimport json\n\nTIMEOUT = 5\n")
PY_G3 = PY.replace(b"    z = x * 2\n    return z\n", b"    z = x * 2\n    w = z + 1\n    return w\n")
PY_OVERLOADS = PY.replace(b"def f(x):\n", b"@overload\ndef f(x: int) -> int: ...\n@overload\ndef f(x: str) -> str: ...\ndef f(x):\n")
PY_ONE_CLASS = b"import os\n\n\nclass C:\n    def m(self):\n        return 1\n"
PY_TWO_LINES = PY.replace(b"    z = x * 2\n", b"    z = x * 2\n    w = x + 1\n")

JS = b'''import { a } from "./a.js";

export function f(x) {
  const y = x + 1;
  return y;
}
export function inc(x) { return x + 1; }
export function dbl(x) { return x * 2; }
export function g(x) {
  const z = x * 2;
  return z;
}

function tail() {
  return a;
}
'''

TS = b'''import { A } from "./a";

export class K {
  m(x: number): number { return x + 1; }
  n(x: number): number { return x * 2; }
}

export function f(a: A): string {
  const s = String(a);
  return s;
}
'''

GO = b'''package main

import (
\t"fmt"
)

type T struct {
\tx int
}

func (t T) A() int { return t.x + 1 }
func (t T) B() int { return t.x * 2 }

func F(x int) int {
\ty := x + 1
\treturn y
}

func Inc(x int) int { return x + 1 }
func Dbl(x int) int { return x * 2 }

func G(x int) int {
\tz := x * 2
\treturn z
}

func main() {
\tfmt.Println(F(1), G(2))
}
'''

RS = b'''use std::fmt;

struct S {
    x: i32,
}

impl S {
    fn a(&self) -> i32 { self.x + 1 }
    fn b(&self) -> i32 { self.x * 2 }
}

fn f(x: i32) -> i32 { x + 1 }
fn g(x: i32) -> i32 { x * 2 }

fn show(s: &S) -> String {
    fmt::format(format_args!("{}", s.x))
}
'''

MD = b'''# Guide

Intro text.

## Install

Run the installer.
Then restart.
## Usage

Call the tool.
Read the output.

## License

Apache-2.0.
'''

SCENARIOS: list[Scenario] = [
    # --- Python ---
    edits("py_disjoint_functions", "src/a.py", PY,
          [(b"y = x + 1", b"y = x + 100")], [(b"return os.sep", b"return os.linesep")], "clean"),
    edits("py_adjacent_functions", "src/a.py", PY,
          [(b"\n\n\ndef g(x):", b"\n\n\ndef f2():\n    return 0\n\n\ndef g(x):")],
          [(b"def g(x):\n", b"def g(x, k=2):\n")], "conflict",
          on_ours=[(b"def g(x):\n", b"def g(x, k=2):\n")]),
    edits("py_adjacent_methods", "src/a.py", PY,
          [(b"return 1\n", b"return 11\n")], [(b"def n(self):\n", b"def n(self, k=0):\n")], "conflict"),
    Scenario("py_insert_after_edited_function", "src/a.py", PY,
             sub(PY, (b"    return z\n", b"    return z + 0\n")),
             sub(PY, (b"    return z\n", b"    return z\n\n\ndef g2():\n    return 3\n")), "clean",
             merged=sub(PY, (b"    return z\n", b"    return z + 0\n\n\ndef g2():\n    return 3\n"))),
    edits("py_imports_both_sides", "src/a.py", PY,
          [(b"import os\n", b"import os\nimport re\n"), (b"y = x + 1", b"y = x + 2")],
          [(b"import os\n", b"import os\nimport sys\n"), (b"return os.sep", b"return sys.platform")], "conflict",
          on_ours=[(b"import re\n", b"import re\nimport sys\n"), (b"return os.sep", b"return sys.platform")]),
    edits("py_rename_against_edit", "src/a.py", PY,
          [(b"def f(x):\n", b"def f_plus(x):\n")], [(b"    y = x + 1\n", b"    y = x + 1  # one more\n")], "conflict"),
    clash("py_same_function", "src/a.py", PY,
          sub(PY, (b"z = x * 2", b"z = x * 3")), sub(PY, (b"z = x * 2", b"z = x * 4")), "conflict",
          ["src/a.py#g"], [b"    z = x * 4\n", b"    z = x * 3\n"]),
    clash("py_same_method", "src/a.py", PY,
          sub(PY, (b"return 2\n", b"return 22\n")), sub(PY, (b"return 2\n", b"return 23\n")), "conflict",
          ["src/a.py#C.n"]),
    clash("py_delete_against_modify", "src/a.py", PY,
          sub(PY, (b"def g(x):\n    z = x * 2\n    return z\n\n\n", b"")),
          sub(PY, (b"z = x * 2", b"z = x * 5")), "conflict", ["src/a.py#g"], [b"    z = x * 5\n"]),
    clash("py_both_add_same_name", "src/a.py", PY,
          PY + b"\n\ndef k():\n    return 'trunk'\n", PY + b"\n\ndef k():\n    return 'change'\n", "conflict",
          ["src/a.py#k"], [b"    return 'trunk'\n", b"    return 'change'\n"]),
    Scenario("py_both_add_same_function_identically", "src/a.py", PY,
             PY + b"\n\ndef k():\n    return 0\n", PY + b"\n\ndef k():\n    return 0\n", "clean",
             merged=PY + b"\n\ndef k():\n    return 0\n"),
    Scenario("py_both_add_different_functions", "src/a.py", PY,
             PY + b"\n\ndef k1():\n    return 1\n", PY + b"\n\ndef k2():\n    return 2\n", "conflict",
             merged=PY + b"\n\ndef k1():\n    return 1\n\n\ndef k2():\n    return 2\n"),
    Scenario("py_both_add_methods", "src/a.py", PY,
             sub(PY, (b"return 2\n", b"return 2\n    def p(self):\n        return 3\n")),
             sub(PY, (b"return 2\n", b"return 2\n    def q(self):\n        return 4\n")), "conflict",
             merged=sub(PY, (b"return 2\n", b"return 2\n    def p(self):\n        return 3\n"
                                             b"    def q(self):\n        return 4\n"))),
    # --- issue 11: one definition per name, delete against modify, move against delete ---
    clash("py_both_add_same_name_apart", "src/a.py", PY,
          sub(PY, (b"\n\n\ndef g(x):", b"\n\n\ndef k():\n    return 'trunk'\n\n\ndef g(x):")),
          PY + b"\n\ndef k():\n    return 'change'\n", "clean", ["src/a.py#k"], [b"    return 'change'\n"]),
    clash("py_rename_onto_a_name_the_other_side_added", "src/a.py", PY,
          sub(PY, (b"\n\n\ndef g(x):", b"\n\n\ndef k():\n    return 'trunk'\n\n\ndef g(x):")),
          sub(PY, (b"def h():", b"def k():")), "clean", ["src/a.py#k"], [b"def k():\n    return os.sep\n"]),
    clash("py_import_rewritten_against_deleted", "src/a.py", PY_JSON,
          sub(PY_JSON, (b"import json\n", b"import simplejson as json\n")), sub(PY_JSON, (b"import json\n", b"")),
          "conflict", ["src/a.py#<file>"], [b"import simplejson as json\n"]),
    clash("py_import_added_beside_one_deleted", "src/a.py", PY_JSON,
          sub(PY_JSON, (b"import json\n", b"import json\nimport re\n")), sub(PY_JSON, (b"import json\n", b"")),
          "conflict", ["src/a.py#<file>"], [b"import re\n"]),
    clash("py_module_statement_deleted_against_modified", "src/a.py", PY_JSON,
          sub(PY_JSON, (b"TIMEOUT = 5\n", b"TIMEOUT = 50\n")), sub(PY_JSON, (b"TIMEOUT = 5\n", b"")),
          "conflict", ["src/a.py#<file>"], [b"TIMEOUT = 50\n"]),
    clash("py_line_moved_against_deleted", "src/a.py", PY_TWO_LINES,
          sub(PY_TWO_LINES, (b"    z = x * 2\n    w = x + 1\n", b"    w = x + 1\n    z = x * 2\n")),
          sub(PY_TWO_LINES, (b"    w = x + 1\n", b"")), "conflict", ["src/a.py#g"], [b"    w = x + 1\n"]),
    clash("py_body_moved_to_a_new_function_against_an_edit_of_it", "src/a.py", PY_G3,
          sub(PY_G3, (b"def g(x):\n", b"def g(x):\n    return _g(x)\n\n\ndef _g(x):\n")),
          sub(PY_G3, (b"    return w\n", b"    return w + 0\n")), "clean", ["src/a.py#g"], [b"    return w + 0\n"]),
    Scenario("py_function_moved_against_deleted", "src/a.py", PY,
             sub(PY, (b"\n\ndef h():\n    return os.sep\n", b"")),
             sub(PY, (b"\n\ndef h():\n    return os.sep\n", b""), (b"def f(x):", b"def h():\n    return os.sep\n\n\ndef f(x):")),
             "clean", merged=sub(PY, (b"\n\ndef h():\n    return os.sep\n", b""))),
    clash("py_overload_deleted_against_renamed", "src/a.py", PY_OVERLOADS,
          sub(PY_OVERLOADS, (b"@overload\ndef f(x: int) -> int: ...\n", b"")),
          sub(PY_OVERLOADS, (b"def f(x: int) -> int: ...", b"def f_int(x: int) -> int: ...")),
          "conflict", ["src/a.py#f"], [b"def f_int(x: int) -> int: ...\n"]),
    clash("py_only_class_deleted_against_a_function_added", "src/a.py", PY_ONE_CLASS, b"import os\n",
          PY_ONE_CLASS + b"\n\ndef k():\n    return 2\n", "conflict", ["src/a.py#<file>"], [b"def k():\n"]),
    clash("py_unparseable_side", "src/a.py", PY,
          sub(PY, (b"return 1\n", b"return 1)\n")), sub(PY, (b"def n(self):\n", b"def n(self, k=0):\n")),
          "conflict", ["src/a.py#<file>"], [b"        return 1)\n"]),
    clash("py_rename_against_rename", "src/a.py", PY,
          sub(PY, (b"def f(x):\n", b"def f_one(x):\n")), sub(PY, (b"def f(x):\n", b"def f_two(x):\n")),
          "conflict", ["src/a.py#f"]),
    clash("py_delete_file_against_modify", "src/a.py", PY, None, sub(PY, (b"z = x * 2", b"z = x * 5")),
          "conflict", ["src/a.py#<file>"]),
    Scenario("py_both_add_file", "src/new.py", None,
             b"def one():\n    return 1\n", b"def two():\n    return 2\n", "conflict",
             merged=b"def one():\n    return 1\ndef two():\n    return 2\n"),
    # --- JavaScript ---
    edits("js_adjacent_functions", "web/a.js", JS,
          [(b"x + 1; }", b"x + 10; }")], [(b"x * 2; }", b"x * 20; }")], "conflict"),
    edits("js_imports_both_sides", "web/a.js", JS,
          [(b'import { a } from "./a.js";\n', b'import { a } from "./a.js";\nimport { b } from "./b.js";\n'),
           (b"const y = x + 1;", b"const y = x + 2;")],
          [(b'import { a } from "./a.js";\n', b'import { a } from "./a.js";\nimport { c } from "./c.js";\n'),
           (b"return a;", b"return [a];")], "conflict",
          on_ours=[(b'import { b } from "./b.js";\n', b'import { b } from "./b.js";\nimport { c } from "./c.js";\n'),
                   (b"return a;", b"return [a];")]),
    clash("js_same_function", "web/a.js", JS,
          sub(JS, (b"const z = x * 2;", b"const z = x * 3;")), sub(JS, (b"const z = x * 2;", b"const z = x ** 2;")),
          "conflict", ["web/a.js#g"]),
    clash("js_delete_against_modify", "web/a.js", JS,
          sub(JS, (b"export function dbl(x) { return x * 2; }\n", b"")), sub(JS, (b"x * 2; }", b"x * 3; }")),
          "conflict", ["web/a.js#dbl"]),
    # --- TypeScript ---
    edits("ts_adjacent_methods", "web/k.ts", TS,
          [(b"return x + 1;", b"return x + 10;")], [(b"n(x: number): number", b"n(x: number, y = 0): number")],
          "conflict"),
    edits("ts_rename_against_edit", "web/k.ts", TS,
          [(b"export function f(a: A): string {\n", b"export function format(a: A): string {\n")],
          [(b"  const s = String(a);\n", b"  const s = String(a).trim();\n")], "conflict"),
    clash("ts_both_add_same_name", "web/k.ts", TS,
          TS + b"\nexport function extra(): number {\n  return 1;\n}\n",
          TS + b"\nexport function extra(): number {\n  return 2;\n}\n", "conflict", ["web/k.ts#extra"]),
    # --- Go ---
    edits("go_adjacent_functions", "cmd/main.go", GO,
          [(b"return x + 1 }", b"return x + 10 }")], [(b"func Dbl(x int) int", b"func Dbl(x int) (r int)")],
          "conflict"),
    edits("go_adjacent_methods", "cmd/main.go", GO,
          [(b"return t.x + 1 }", b"return t.x + 10 }")], [(b"func (t T) B() int", b"func (t *T) B() int")],
          "conflict"),
    edits("go_imports_both_sides", "cmd/main.go", GO,
          [(b'\t"fmt"\n', b'\t"fmt"\n\t"os"\n'), (b"y := x + 1", b"y := x + 2")],
          [(b'\t"fmt"\n', b'\t"fmt"\n\t"strings"\n'), (b"z := x * 2", b"z := x * 3")], "conflict",
          on_ours=[(b'\t"os"\n', b'\t"os"\n\t"strings"\n'), (b"z := x * 2", b"z := x * 3")]),
    clash("go_same_function", "cmd/main.go", GO,
          sub(GO, (b"y := x + 1", b"y := x + 2")), sub(GO, (b"y := x + 1", b"y := x - 1")), "conflict",
          ["cmd/main.go#F"]),
    clash("go_delete_against_modify", "cmd/main.go", GO,
          sub(GO, (b"func (t T) B() int { return t.x * 2 }\n", b"")),
          sub(GO, (b"return t.x * 2", b"return t.x * 4")), "conflict", ["cmd/main.go#T.B"]),
    # --- Rust ---
    edits("rs_adjacent_functions", "src/lib.rs", RS,
          [(b"{ x + 1 }", b"{ x + 100 }")], [(b"fn g(x: i32)", b"pub fn g(x: i32)")], "conflict"),
    edits("rs_adjacent_impl_methods", "src/lib.rs", RS,
          [(b"{ self.x + 1 }", b"{ self.x + 10 }")], [(b"fn b(&self)", b"pub fn b(&self)")], "conflict"),
    edits("rs_use_both_sides", "src/lib.rs", RS,
          [(b"use std::fmt;\n", b"use std::fmt;\nuse std::io;\n"), (b"{ x + 1 }", b"{ x + 2 }")],
          [(b"use std::fmt;\n", b"use std::fmt;\nuse std::mem;\n"), (b'"{}", s.x', b'"{} ", s.x')], "conflict",
          on_ours=[(b"use std::io;\n", b"use std::io;\nuse std::mem;\n"), (b'"{}", s.x', b'"{} ", s.x')]),
    clash("rs_same_function", "src/lib.rs", RS,
          sub(RS, (b"{ x * 2 }", b"{ x * 4 }")), sub(RS, (b"{ x * 2 }", b"{ x << 1 }")), "conflict",
          ["src/lib.rs#g"]),
    clash("rs_both_add_same_name", "src/lib.rs", RS,
          RS + b"\nfn extra() -> u8 {\n    1\n}\n", RS + b"\nfn extra() -> u8 {\n    2\n}\n", "conflict",
          ["src/lib.rs#extra"]),
    # --- Markdown ---
    edits("md_adjacent_sections", "docs/guide.md", MD,
          [(b"Then restart.\n", b"Then restart the shell.\n")], [(b"## Usage\n", b"## Usage and flags\n")],
          "conflict"),
    edits("md_disjoint_sections", "docs/guide.md", MD,
          [(b"Run the installer.", b"Run the installer as root.")], [(b"Apache-2.0.", b"Apache-2.0, see LICENSE.")],
          "clean"),
    clash("md_same_section", "docs/guide.md", MD,
          sub(MD, (b"Call the tool.", b"Call the tool twice.")), sub(MD, (b"Call the tool.", b"Call the tool once.")),
          "conflict", ["docs/guide.md#Guide.Usage"]),
    # --- files no grammar reads ---
    clash("txt_line_conflict", "notes.txt", b"one\ntwo\nthree\n", b"one\nTWO\nthree\n", b"one\n2\nthree\n",
          "conflict", ["notes.txt#<file>"], [b"2\n", b"TWO\n"]),
    clash("binary_both_changed", "img.bin", b"\0\1\2", b"\0\1\3", b"\0\1\4", "conflict", ["img.bin#<file>"]),
]
