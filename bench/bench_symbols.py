"""Symbol engine figures on the running Python's standard library (`Lib`, no site-packages),
each beside a baseline measured in the same run:

- symbol tables built cold on one core, against raw tree-sitter parsing of the same bytes;
- symbol tables on two cores (process pool), against raw parsing on one core;
- universal-ctags on the same files, against the one-core tables;
- facts of a 10-file change against a warm 2 000-file base (p95): its tables built and the
  mentions of its own names answered (symbols/mentions.py), the changed blobs read inside the
  measurement, and again with their tables already in the cache (as when
  facts.preview came first). Each change adds a line to one function body or a parameter to
  one function per file, so `affected` is looked up for real names.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import random
import shutil
import subprocess
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor

from bench.worker import median, pct
from lonca.symbols import SymbolCache, TreeEntry, compute_facts, symbol_table, warm_base
from lonca.symbols.parsing import parser_for

FACTS_RUNS = 60
CHANGED_FILES = 10
BASE_FILES = 2000
BASE_KEY = "stdlib"


def _files() -> list[pathlib.Path]:
    lib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in lib.rglob("*.py") if "site-packages" not in p.parts)


def _tables_of(paths: list[str]) -> int:
    n = 0
    for p in paths:
        n += len(symbol_table(p, pathlib.Path(p).read_bytes()).symbols)
    return n


def _noop(_: int) -> int:
    return os.getpid()


def _oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _change(data: bytes, rng: random.Random) -> bytes:
    """Add a line to the body of one function, or a parameter to one, or a line at the end."""
    lines = data.split(b"\n")
    defs = [i for i, line in enumerate(lines) if line.lstrip().startswith(b"def ")
            and line.rstrip().endswith(b":")]
    if not defs:
        return data + b"\n# changed\n"
    i = rng.choice(defs)
    if rng.random() < 0.3:
        lines[i] = lines[i].replace(b"(", b"(bench_extra=None, ", 1).replace(b", )", b")")
    else:
        indent = len(lines[i]) - len(lines[i].lstrip()) + 4
        lines.insert(i + 1, b" " * indent + b"bench_value = 1")
    return b"\n".join(lines)


def _facts_p95(contents: dict[str, bytes], warm_new: bool) -> tuple[float, float, float]:
    """p95 and median of the facts in ms, and the seconds the base took to warm: its tables,
    then the mentions of its own symbols' names (what the worker does off the request path
    once a base is asked about)."""
    rng = random.Random(17)
    paths = sorted(contents)[:BASE_FILES]
    blobs = {_oid(contents[p]): contents[p] for p in paths}
    base = {p: TreeEntry(_oid(contents[p]), "100644") for p in paths}
    cache = SymbolCache()
    started = time.perf_counter()
    for p in paths:
        cache.table(p, base[p].oid, lambda p=p: contents[p])
    warm_base(base, cache, blobs.__getitem__, BASE_KEY)
    warm_s = time.perf_counter() - started
    times = []
    for _ in range(FACTS_RUNS):
        new = dict(base)
        for p in rng.sample(paths, CHANGED_FILES):
            data = _change(contents[p], rng)
            blobs[_oid(data)] = data
            new[p] = TreeEntry(_oid(data), "100644")
        if warm_new:    # as after facts.preview: the new blobs' tables are cached
            for p, e in new.items():
                cache.table(p, e.oid, lambda e=e: blobs[e.oid])
        started = time.perf_counter()
        compute_facts(base, new, blobs.__getitem__, cache, BASE_KEY)
        times.append(time.perf_counter() - started)
    return pct(times, 95) * 1000, median(times) * 1000, warm_s


def main() -> None:
    files = _files()
    contents = {str(p): p.read_bytes() for p in files}
    total = sum(map(len, contents.values()))
    mb = total / 1e6
    print(f"{len(files)} files, {mb:.1f} MB of {sysconfig.get_paths()['stdlib']}")

    parser = parser_for("python")
    started = time.perf_counter()
    for data in contents.values():
        parser.parse(data)
    raw_s = time.perf_counter() - started

    started = time.perf_counter()
    for path, data in contents.items():
        symbol_table(path, data)
    one_s = time.perf_counter() - started

    paths = list(contents)
    chunks = [paths[i::64] for i in range(64)]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_noop, range(4)))     # processes started, not measured
        started = time.perf_counter()
        list(pool.map(_tables_of, chunks))
        two_s = time.perf_counter() - started

    ctags_s = None
    if shutil.which("ctags"):
        started = time.perf_counter()
        subprocess.run(["ctags", "--languages=Python", "-f", os.devnull, "-L", "-"],
                       input="\n".join(paths), text=True, check=True, capture_output=True)
        ctags_s = time.perf_counter() - started

    cold_p95, cold_median, warm_s = _facts_p95(contents, warm_new=False)
    warm_p95, warm_median, _ = _facts_p95(contents, warm_new=True)

    raw, one, two = mb / raw_s, mb / one_s, mb / two_s
    rows = [
        ("raw tree-sitter parse, 1 core", f"{raw:.2f} MB/s", "-", "-"),
        ("symbol tables cold, 1 core", f"{one:.2f} MB/s", "raw parse 1 core",
         f"{one / raw:.2f}x (target >= 0.6)"),
        ("symbol tables cold, 2 cores", f"{two:.2f} MB/s", "raw parse 1 core",
         f"{two / raw:.2f}x (target >= 1.1)"),
    ]
    if ctags_s is not None:
        ctags = mb / ctags_s
        rows.append(("universal-ctags, 1 core", f"{ctags:.2f} MB/s", "symbol tables 1 core",
                     f"tables are {one / ctags:.2f}x ctags"))
    rows += [
        (f"warming the base ({min(BASE_FILES, len(files))} files)", f"{warm_s:.2f} s",
         "symbol tables 1 core", f"{warm_s / one_s * len(files) / min(BASE_FILES, len(files)):.2f}x"),
        (f"facts, {CHANGED_FILES} changed of {BASE_FILES}, p95", f"{cold_p95:.1f} ms",
         f"median {cold_median:.1f} ms", "target < 20 ms"),
        ("  same, changed blobs already cached, p95", f"{warm_p95:.1f} ms",
         f"median {warm_median:.1f} ms", "target < 20 ms"),
    ]
    widths = [max(len(r[i]) for r in rows + [("figure", "value", "baseline", "ratio")])
              for i in range(4)]
    for row in [("figure", "value", "baseline", "ratio")] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
