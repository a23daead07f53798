"""Which symbols of a base mention a name as a whole identifier: what `affected` is made of.

A table answers for a name once and keeps the answer (FileSymbols.mentions), so the first change
that asks about a common name (`__init__`, `main`) reads every file that holds it, and the next
ones do not. `warm_base` asks ahead of time, off the request path, for every name a change to
that base could ask about (the names of its own symbols), reading each file once.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import Callable, Iterator, Mapping

from .cache import BaseIndex, SymbolCache
from .languages import SECTION_LANGUAGES
from .sections import SECTION_KINDS
from .table import DEF, FileSymbols, Symbol
from .trees import has_text

# kinds whose names are never looked for: they are not called or referred to by name
NOT_NAMES = frozenset({"file", "def", "impl"}) | SECTION_KINDS
_IDENT_CLASS = rb"[A-Za-z0-9_$\x80-\xff]"
_TOKEN = re.compile(_IDENT_CLASS + rb"+")     # a maximal run of identifier bytes


def base_tables(base: Mapping, cache: SymbolCache,
                load: Callable[[str], bytes]) -> Iterator[tuple[str, FileSymbols]]:
    """(oid, table) of each file of `base` (path -> TreeEntry) whose text names can be in:
    read by a grammar, and not sections. Symlinks and submodules have no text of their own."""
    entries = [(path, e.oid) for path, e in base.items() if has_text(e.mode)]
    for (path, oid), table in zip(entries, cache.held(entries)):
        if table is None:
            table = cache.table(path, oid, lambda oid=oid: load(oid))
        if table.status == "parsed" and table.language not in SECTION_LANGUAGES:
            yield oid, table


def mentioning(table: FileSymbols, names: set[str], data: Callable[[], bytes]) -> set[str]:
    """Ids of the innermost symbols of `table` whose text holds one of `names` as a whole
    identifier: `<def>` for a type's own text, `<file>` outside every symbol."""
    memo = table.mentions
    missing = [n for n in names if n not in memo]
    if missing:
        text = data()
        spans, starts = table.spans
        for name in missing:
            memo[name] = tuple({_holder(spans, starts, m.start(), table)
                                for m in _whole_word(name).finditer(text)})
    found: set[str] = set()
    for name in names:
        found.update(memo[name])
    return found


def mentioned(names: set[str], base: Mapping, cache: SymbolCache, load: Callable[[str], bytes],
              index: BaseIndex | None = None) -> set[str]:
    """Ids of the symbols of `base` whose text holds one of `names`: with the base's index
    (warm_base), from the files it lists for each name; without it, from every file whose
    names hold one."""
    found: set[str] = set()
    if index is not None:
        for name in names:
            for oid, table in index.get(name, ()):
                found |= mentioning(table, {name}, lambda oid=oid: load(oid))
        return found
    for oid, table in base_tables(base, cache, load):
        hit = names.intersection(table.names)      # the few names, looked up in the many
        if hit:
            found |= mentioning(table, hit, lambda oid=oid: load(oid))
    return found


def warm_base(base: Mapping, cache: SymbolCache, load: Callable[[str], bytes],
              key: str | None = None) -> int:
    """Answer, for every table of `base`, every name of the base's own symbols that its text
    holds (the only names a change to this base can ask about); with `key`, also keep which
    files hold each name, so that `affected` visits those files alone. The number of files
    read."""
    tables = list(base_tables(base, cache, load))
    vocabulary = {s.name for _, t in tables for s in t.symbols if s.kind not in NOT_NAMES}
    index: BaseIndex = {}
    read = 0
    for oid, table in tables:
        held = vocabulary.intersection(table.names)
        wanted = {n for n in held if n not in table.mentions}
        if wanted:
            _warm(table, load(oid), wanted)
            read += 1
        if key is not None:
            for name in held:
                index.setdefault(name, []).append((oid, table))
    if key is not None:
        cache.keep_base_index(key, index)
    return read


def _warm(table: FileSymbols, data: bytes, wanted: set[str]) -> None:
    """One pass over the text, piece by piece of its innermost symbols."""
    by_token = {name.encode(): name for name in wanted}
    found: dict[str, set[str]] = {name: set() for name in wanted}
    for start, end, holder in _pieces(table, len(data)):
        for token in by_token.keys() & set(_TOKEN.findall(data, start, end)):
            found[by_token[token]].add(holder)
    for name, holders in found.items():
        table.mentions[name] = tuple(holders)


def _pieces(table: FileSymbols, size: int) -> Iterator[tuple[int, int, str]]:
    """[start, end) pieces of the text, each with the id of the innermost symbol holding it."""
    spans, _ = table.spans
    stack: list[Symbol] = []
    pos = 0
    for s in spans:
        while stack and stack[-1].end_byte <= s.start_byte:
            top = stack.pop()
            yield pos, top.end_byte, _holder_id(top)
            pos = max(pos, top.end_byte)
        yield pos, s.start_byte, _holder_id(stack[-1]) if stack else table.file_id
        pos = s.start_byte
        stack.append(s)
    while stack:
        top = stack.pop()
        yield pos, top.end_byte, _holder_id(top)
        pos = max(pos, top.end_byte)
    yield pos, size, table.file_id


@lru_cache(maxsize=4096)
def _whole_word(name: str) -> re.Pattern[bytes]:
    """`name` as a whole identifier. The name comes first, so the regex engine searches for it
    as a literal and checks both boundaries in C (a short name like `f` occurs mostly inside
    longer identifiers)."""
    word = re.escape(name.encode())
    return re.compile(word + rb"(?<!" + _IDENT_CLASS + word + rb")(?!" + _IDENT_CLASS + rb")")


def _holder(spans: list[Symbol], starts: list[int], pos: int, table: FileSymbols) -> str:
    i = bisect_right(starts, pos) - 1
    while i >= 0:
        s = spans[i]
        if s.end_byte > pos:
            return _holder_id(s)
        i -= 1
    return table.file_id


def _holder_id(s: Symbol) -> str:
    return f"{s.id}.{DEF}" if s.def_hash is not None else s.id
