"""Reading bytes safely: the checks that decide whether a grammar may see a file, and a parse
bounded in time.

py-tree-sitter 0.26 dropped `Parser.timeout_micros`; its `progress_callback` is the way to abort,
and it is only honoured when the source comes from a read callback (with a bytestring it is
ignored with a warning), so the bounded parse feeds the bytes through one. An aborted parse
raises ValueError.

py-tree-sitter 0.26.1 keeps a reference to chunks its read callback returned and never lets it
go: every chunk of a parse given an old tree (an edit's incremental parse), the first of a cold
one (the whole text, up to _CHUNK). So each parse leaked bytes it read, the text of every file
parsed from scratch (docs/decisions.md, "A reference py-tree-sitter never lets go"). The bounded
parse gives back, after the parse, the references the binding still holds on the chunks it was
handed (`_give_back`), counted by refcount: a binding that lets them go is given nothing back.
"""
from __future__ import annotations

import ctypes
import re
import sys
import threading
import time

from tree_sitter import Parser, Range, Tree
from tree_sitter_language_pack import get_language

MAX_FILE_BYTES = 8 * 1024 * 1024
# A legitimate 8 MiB file parses in about two seconds here; the limit leaves room for a loaded
# machine and still stops a pathological input.
BASE_TIMEOUT_S = 2.0
TIMEOUT_S_PER_MIB = 0.75
_CHUNK = 1 << 20
# External scanners that write a stack, an entry per nesting level, into tree-sitter's 1 024-byte
# state buffer without checking that it fits: past about 250 levels (Markdown block quotes and
# lists, YAML block nodes) or 500 (Python indentation) the write runs off the buffer and the
# process dies (tree-sitter-markdown #243, tree-sitter-yaml #48, tree-sitter-python #350; a
# segfault here with the language pack 0.13.0). Each level is opened by at least one more byte of
# indentation or markers at the start of a line, so a file none of whose lines starts with that
# many can not get there; one that has such a line is not given to the grammar.
_DEEP_PREFIX = {
    "markdown": rb"(?:[ \t>]|[-*+][ \t]|[0-9]{1,9}[.)][ \t]){200}",
    "yaml": rb"(?:[ \t]|[-?:][ \t]){200}",
    "python": rb"[ \t]{400}",
}
# the first line, then the lines after a \n and after a \r (a line break to these scanners too):
# a pattern that starts with one literal byte is searched for several times faster
_DEEP = {lang: tuple(re.compile(start + prefix) for start in (b"", b"\n", b"\r"))
         for lang, prefix in _DEEP_PREFIX.items()}

# Kotlin's scanner keeps a byte for each string open and abort()s at 1 024 of them
# (tree-sitter-kotlin scanner.c, stack_push). A string opens inside another only in a `${…}`, so a
# file with fewer `${` than that can not get there. Counting is the only sure bound a check that
# does not parse has (a `}` inside a string would fool a depth count), so a file with 1 000 `${`
# one after the other is not given to the grammar either: rare, and read whole, never a crash.
_TEMPLATES = {"kotlin": (b"${", 1000)}

_local = threading.local()


def parser_for(language: str, ranged: bool = False) -> Parser:
    """One parser per language and thread: a Parser is not safe to share between threads. A
    `ranged` one is kept apart, so that its included ranges never reach a whole-file parse."""
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get((language, ranged))
    if parser is None:
        parser = parsers[(language, ranged)] = Parser(get_language(language))
    return parser


def time_limit(size: int) -> float:
    return BASE_TIMEOUT_S + TIMEOUT_S_PER_MIB * size / (1024 * 1024)


def parse_bounded(language: str, data: bytes, limit_s: float | None = None,
                  old: Tree | None = None, ranges: list[Range] | None = None) -> Tree | None:
    """The tree of `data`, or None when the time limit ran out; `old`, an earlier tree already
    edited to match `data`, lets tree-sitter reuse what the edit left alone; `ranges`, when
    given, are the only parts of `data` the grammar reads, as if they followed each other."""
    size = len(data) if ranges is None else sum(r.end_byte - r.start_byte for r in ranges)
    deadline = time.monotonic() + (time_limit(size) if limit_s is None else limit_s)

    handed: list[bytes] = []    # the chunks the parse was given, each a new object

    def read(offset: int, _point: tuple[int, int]) -> bytes:
        # never `data` itself (a slice of all of it is that object): a reference kept on it
        # could not be told from its owners'
        end = offset + _CHUNK if offset or len(data) < 2 else min(_CHUNK, len(data) - 1)
        chunk = data[offset:end]
        if len(chunk) > 1:  # b"" and one-byte slices are shared objects that are never freed
            handed.append(chunk)
        return chunk

    def progress(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline

    parser = parser_for(language, ranges is not None)
    if ranges is not None:
        parser.included_ranges = ranges
    try:
        if old is None:     # parse() takes no None for its old tree
            return parser.parse(read, progress_callback=progress)
        return parser.parse(read, old, progress_callback=progress)
    except ValueError:
        return None
    finally:
        _give_back(handed)


_OWN_REFS = 3   # a handed chunk's own references in _give_back: `handed`, the loop's name, getrefcount's argument


def _give_back(handed: list[bytes]) -> None:
    """Drop the references the binding kept on `handed` (nobody else saw these objects)."""
    for chunk in handed:
        for _ in range(sys.getrefcount(chunk) - _OWN_REFS):
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(chunk))


def edit_span(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(start, old_end, new_end): `old[start:old_end]` became `new[start:new_end]`, the rest
    being their common prefix and common suffix."""
    limit = min(len(old), len(new))
    start = _common(old, new, limit, 1)
    suffix = _common(old, new, limit - start, -1)
    return start, len(old) - suffix, len(new) - suffix


def edited(tree: Tree, old: bytes, new: bytes) -> Tree:
    """A copy of `old`'s tree told that `old` became `new` (one edit, edit_span)."""
    start, old_end, new_end = edit_span(old, new)
    copy = tree.copy()
    copy.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end,
              start_point=point(old, start), old_end_point=point(old, old_end),
              new_end_point=point(new, new_end))
    return copy


def _common(a: bytes, b: bytes, limit: int, step: int) -> int:
    """Length of the common prefix (step 1) or suffix (step -1), at most `limit`: blocks are
    compared in C, then the first block that differs is halved down to the byte."""
    n = 0
    block = 4096
    while n < limit:
        size = min(block, limit - n)
        if step == 1:
            x, y = a[n:n + size], b[n:n + size]
        else:
            x, y = a[len(a) - n - size:len(a) - n], b[len(b) - n - size:len(b) - n]
        if x == y:
            n += size
            continue
        same, differs = 0, size     # x and y agree on `same` bytes and not on `differs`
        while differs - same > 1:
            mid = (same + differs) // 2
            if (x[:mid] == y[:mid]) if step == 1 else (x[size - mid:] == y[size - mid:]):
                same = mid
            else:
                differs = mid
        return n + same
    return n


def point(data: bytes, offset: int) -> tuple[int, int]:
    """(row, byte column) of `offset`, as tree-sitter counts them."""
    return data.count(b"\n", 0, offset), offset - data.rfind(b"\n", 0, offset) - 1


def text_problem(data: bytes, language: str | None = None) -> str | None:
    """Why `data` is not text a grammar (that of `language`) may read, or None."""
    if len(data) > MAX_FILE_BYTES:
        return f"over {MAX_FILE_BYTES} bytes"
    if b"\0" in data:
        return "binary (NUL byte)"
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            return f"invalid UTF-8 at byte {err.start}"
    deep = _DEEP.get(language or "")
    if deep is not None and (deep[0].match(data) or deep[1].search(data)
                             or b"\r" in data and deep[2].search(data)):
        return f"nested too deep for the {language} grammar"
    templates = _TEMPLATES.get(language or "")
    if templates is not None and data.count(templates[0]) >= templates[1]:
        return (f"may be nested too deep for the {language} grammar ({templates[1]} or more string templates, "
                "and its scanner dies past 1 024 strings nested)")
    return None
