"""Cross-check with universal-ctags on the running Python's standard library: the function,
class and method definitions (name and line) agree on at least 98 % of them.

Categories where the two differ by design are counted apart and printed: definitions inside a
function body (part of that function here, not symbols) and `name = lambda ...` (ctags calls it
a function; here it is the enclosing text). Everything else, files tree-sitter cannot read
included, counts as disagreement.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sysconfig
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from lonca.symbols import symbol_table

AGREEMENT = 0.98
CTAGS_KINDS = {"class": "class", "function": "function", "member": "method"}


def stdlib_files() -> list[pathlib.Path]:
    lib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in lib.rglob("*.py")
                  if "site-packages" not in p.parts and "dist-packages" not in p.parts)


def ours(path: str) -> tuple[str, list[tuple[str, int, str]], str]:
    fs = symbol_table(path, pathlib.Path(path).read_bytes())
    return path, [(s.name, s.def_line, s.kind) for s in fs.symbols
                  if s.kind in ("class", "function", "method")], fs.status


def ctags(files: list[pathlib.Path]) -> list[dict]:
    proc = subprocess.run(
        ["ctags", "--fields=+nKZ", "--output-format=json", "--languages=Python",
         "--kinds-Python=cfm", "-f", "-", "-L", "-"],
        input="\n".join(map(str, files)), capture_output=True, text=True, timeout=600, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def by_design(tag: dict, kinds: dict[tuple[str, str], str]) -> str | None:
    scope = tag.get("scope")
    if tag.get("scopeKind") in ("function", "member"):
        return "inside a function body"
    if scope:
        parts = scope.split(".")
        for i in range(1, len(parts)):
            if kinds.get((tag["path"], ".".join(parts[:i]))) in ("function", "member"):
                return "inside a function body"
    if "lambda" in tag.get("pattern", "") and not tag["pattern"].lstrip("/^ \t").startswith(
            ("def ", "async def ", "class ")):
        return "lambda assigned to a name"
    return None


def test_agrees_with_ctags_on_the_standard_library() -> None:
    if shutil.which("ctags") is None:
        if os.environ.get("CI"):
            pytest.fail("universal-ctags is required in CI (apt-get install universal-ctags)")
        pytest.skip("universal-ctags is not installed")
    files = stdlib_files()
    assert len(files) > 1000
    tags = ctags(files)
    kinds = {(t["path"], f"{t['scope']}.{t['name']}" if t.get("scope") else t["name"]): t["kind"]
             for t in tags}
    theirs: set[tuple[str, str, int]] = set()
    apart: Counter[str] = Counter()
    for t in tags:
        if t["kind"] not in CTAGS_KINDS:
            continue
        why = by_design(t, kinds)
        if why:
            apart[why] += 1
        else:
            theirs.add((t["path"], t["name"], t["line"]))
    mine: set[tuple[str, str, int]] = set()
    unread: set[str] = set()
    with ProcessPoolExecutor(2) as pool:
        for path, found, status in pool.map(ours, map(str, files), chunksize=16):
            mine.update((path, name, line) for name, line, _ in found)
            if status != "parsed":
                unread.add(path)
    agree = mine & theirs
    only_ctags = theirs - mine
    only_ours = mine - theirs
    disagreement = Counter()
    for path, _, _ in only_ctags:
        disagreement["ctags only: file tree-sitter cannot read" if path in unread
                     else "ctags only: other"] += 1
    for _ in only_ours:
        disagreement["ours only"] += 1
    total = len(agree) + len(only_ctags) + len(only_ours)
    ratio = len(agree) / total
    print(f"\n{len(files)} files; agree {len(agree)} of {total} = {ratio:.4f}"
          f" ({len(agree) / (total + sum(apart.values())):.4f} counting those apart by design)")
    for name, n in sorted(apart.items()):
        print(f"  apart by design: {name}: {n}")
    for name, n in sorted(disagreement.items()):
        print(f"  disagreement: {name}: {n}")
    for sample in sorted(only_ctags - {t for t in only_ctags if t[0] in unread})[:10]:
        print("  e.g. ctags only:", sample)
    for sample in sorted(only_ours)[:10]:
        print("  e.g. ours only:", sample)
    assert ratio >= AGREEMENT
