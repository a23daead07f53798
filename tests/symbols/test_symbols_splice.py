"""A table spliced from the one of the blob it replaces (symbols/splice.py) is the table a whole
parse gives; `names` may keep identifiers the edit removed, never lose one."""
from __future__ import annotations

import pathlib
import random
import sysconfig

import pytest

from symtrees import same_table

from lonca.symbols import symbol_table
from lonca.symbols.splice import spliced_table

GOLDEN = pathlib.Path(__file__).parent / "golden"
SOURCES = {p.name: p.read_bytes() for p in sorted(GOLDEN.iterdir()) if p.suffix != ".txt"}
STDLIB = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))


def line_edit(data: bytes, rng: random.Random) -> bytes:
    """One edit of the kinds people make: a line copied, moved, removed, re-indented,
    shortened, or a few lines reversed."""
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    how = rng.randrange(6)
    if how == 0:
        lines.insert(i, lines[i])
    elif how == 1:
        del lines[i]
    elif how == 2:
        lines[i] = lines[i].replace(b" ", b"  ", 1)
    elif how == 3:
        lines.insert(rng.randrange(len(lines)), lines[i])
    elif how == 4:
        lines[i] = lines[i][:-1] if lines[i] else b"x"
    else:
        j = min(len(lines), i + rng.randrange(2, 8))
        lines[i:j] = lines[i:j][::-1]
    return b"\n".join(lines)


def check(path: str, old: bytes, new: bytes) -> bool:
    """Whether the splice answered; when it did, it must agree with a whole parse."""
    got = spliced_table(path, symbol_table(path, old), old, new)
    if got is None:
        return False
    whole = symbol_table(path, new)
    assert whole.status == "parsed", f"{path}: spliced a file a whole parse cannot read"
    assert same_table(got, whole), f"{path}: spliced table differs"
    return True


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_golden_line_edits_splice_as_a_whole_parse(name: str) -> None:
    rng = random.Random(name)
    for _ in range(150):
        check(name, SOURCES[name], line_edit(SOURCES[name], rng))


def test_golden_garbage_never_splices_wrongly() -> None:
    rng = random.Random(5)
    pieces = [b"\n", b" ", b"x", b"(", b")", b"{", b"}", b":", b";", b"'", b'"', b"\n    x = 1\n",
              b"def f(a):\n    return a\n", b"void h() {}\n", b"@dec\n", b"# note\n", b"*/", b"/*"]
    for _ in range(1500):
        name = rng.choice(sorted(SOURCES))
        old = SOURCES[name]
        at = rng.randrange(len(old) + 1)
        new = old[:at] + b"".join(rng.sample(pieces, rng.randrange(1, 3))) + old[at + rng.randrange(30):]
        check(name, old, new)


def test_stdlib_edits_mostly_splice() -> None:
    """Over the standard library, one body line added or one line changed per file: the splice
    answers for most files, and always as a whole parse would."""
    rng = random.Random(17)
    answered = tried = 0
    for source in STDLIB[::12]:
        data = source.read_bytes()
        if symbol_table(source.name, data).status != "parsed":
            continue
        lines = data.split(b"\n")
        defs = [i for i, line in enumerate(lines) if line.lstrip().startswith(b"def ")]
        if not defs:
            continue
        i = rng.choice(defs)
        indent = len(lines[i]) - len(lines[i].lstrip()) + 4
        body = b"\n".join(lines[:i + 1] + [b" " * indent + b"added = 1"] + lines[i + 1:])
        for new in (body, line_edit(data, rng)):
            tried += 1
            answered += check(source.name, data, new)
    assert tried > 100
    assert answered > tried // 2, f"the splice answered {answered} of {tried}"


def test_a_dedent_that_ends_a_class_is_not_spliced_over() -> None:
    old = (b"class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n\n"
           b"    def h(self):\n        return 3\n")
    new = old.replace(b"    def h(self)", b"def h(self)")
    check("a.py", old, new)
    assert [s.qualified for s in symbol_table("a.py", new).symbols if s.kind != "def"] == \
        ["A", "A.f", "A.g", "h", "<file>"]


def test_a_namespace_gives_its_context() -> None:
    """C# top-level statements make `{ ... }` valid outside a namespace and not inside one."""
    old = SOURCES["Client.cs"]
    new = old.replace(b"    public interface IClient\n", b"")
    assert symbol_table("Client.cs", new).status == "unread"
    assert check("Client.cs", old, new) is False
    renamed = old.replace(b"int Charge(int a, int b);", b"int Charged(int a, int b);")
    assert check("Client.cs", old, renamed) is True
