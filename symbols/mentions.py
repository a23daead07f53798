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

from .cache import SymbolCache
from .shared_map import SharedMap
from .languages import SECTION_LANGUAGES
from .table import DEF, FileSymbols, Symbol
from .trees import has_text

_IDENT_CLASS = rb"[A-Za-z0-9_$\x80-\xff]"
_TOKEN = re.compile(_IDENT_CLASS + rb"+")     # a maximal run of identifier bytes
_CHUNK = 512    # files whose held or stored tables base_tables asks for at once


def base_tables(base: Mapping, cache: SymbolCache, load: Callable[[str], bytes],
                before: Mapping[str, tuple[str, FileSymbols]] | None = None,
                ) -> Iterator[tuple[str, FileSymbols]]:
    """(oid, table) of each file of `base` (path -> TreeEntry) whose text names can be in:
    read by a grammar, and not sections. Symlinks and submodules have no text of their own.
    `before`, path -> (oid, table) of an earlier base: a file's table there is what the new one
    is spliced from."""
    entries = [(path, e.oid) for path, e in base.items() if has_text(e.mode)]
    for at in range(0, len(entries), _CHUNK):   # the caller's `stop` is asked between chunks
        chunk = entries[at:at + _CHUNK]
        for (path, oid), table in zip(chunk, cache.stored(chunk)):
            if table is None:
                was = before.get(path) if before else None
                table = cache.table(path, oid, lambda oid=oid: load(oid), was[0] if was else None,
                                    keep_tree=before is not None, base_table=was[1] if was else None)
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
              index: NameIndex | None = None) -> set[str]:
    """Ids of the symbols of `base` whose text holds one of `names`: with the base's index
    (warm_base), from the files it lists for each name; without it, from every file whose
    names hold one."""
    found: set[str] = set()
    if index is not None:
        for name in names:
            for oid, table in index.holding(name):
                found |= mentioning(table, {name}, lambda oid=oid: load(oid))
        return found
    for oid, table in base_tables(base, cache, load):
        hit = names.intersection(table.names)      # the few names, looked up in the many
        if hit:
            found |= mentioning(table, hit, lambda oid=oid: load(oid))
    return found


class NameIndex:
    """Which files of one base hold each name of the base's vocabulary (the names its own
    symbols define): `files` path -> (oid, table) of the files names can be in (base_tables),
    `names` name -> (how many of those files define it, a tuple of the paths whose text holds
    it: no set of 300 000 names to hash again at a restart). The
    next base's index is made from this one and the paths that changed (warm_base): both maps
    are SharedMaps, so the copy costs the shards that change, not 400 000 entries held in one
    call of C, and a holder set is copied only when it changes; the index of an older base
    stays as it was for the proposals still made against it."""

    __slots__ = ("files", "names")

    def __init__(self, files: Mapping[str, tuple[str, FileSymbols]] | None = None,
                 names: Mapping[str, tuple[int, tuple[str, ...]]] | None = None) -> None:
        self.files: SharedMap[str, tuple[str, FileSymbols]] = \
            files if isinstance(files, SharedMap) else SharedMap(files or {})
        self.names: SharedMap[str, tuple[int, tuple[str, ...]]] = \
            names if isinstance(names, SharedMap) else SharedMap(names or {})

    def holding(self, name: str) -> list[tuple[str, FileSymbols]]:
        files = self.files
        entry = self.names.get(name)
        return [files[p] for p in entry[1]] if entry is not None else []


def warm_base(base: Mapping, cache: SymbolCache, load: Callable[[str], bytes],
              key: str | None = None, since: NameIndex | None = None,
              stop: Callable[[], bool] = lambda: False) -> NameIndex | None:
    """Answer, for every table of `base`, every name of the base's own symbols that its text
    holds (the only names a change to this base can ask about), and index which files hold each
    name, so that `affected` visits those files alone; with `key`, the cache keeps the index.
    `base` is the whole tree (path -> TreeEntry), or, with `since` (the index of an earlier
    base), only the paths that changed since then (path -> TreeEntry, None where deleted): the
    work is then proportional to them and to the files holding the names that came or went.
    None when `stop()` said to stop before the end."""
    if since is None:
        with cache.holding_puts():
            index = _whole(base, cache, load, stop)
        if index is not None and key is not None:
            cache.keep_base_index(key, index)
        return index
    before = since
    files, names = before.files.copy(), before.names.copy()
    counts: dict[str, int] = {}             # name -> files defining it, as changed by this warm
    holders: dict[str, set[str]] = {}       # name -> its holder paths, as changed by this warm

    def count(name: str) -> int:
        if name not in counts:
            entry = names.get(name)
            counts[name] = entry[0] if entry is not None else 0
        return counts[name]

    def holder_set(name: str) -> set[str]:
        """The holders of `name`, copied once a warm, when they change."""
        if name not in holders:
            entry = names.get(name)
            holders[name] = set(entry[1]) if entry is not None else set()
        return holders[name]

    held_before: dict[str, set[str]] = {}   # changed path -> the names it held before
    for path in base:
        old = before.files.get(path)
        if old is not None:
            held_before[path] = {name for name in old[1].names if name in before.names}
            for name in old[1].defines:
                counts[name] = count(name) - 1
    texts = {p: e for p, e in base.items() if e is not None}
    new_tables = []
    for n, (oid, table) in enumerate(base_tables(texts, cache, load, before.files)):
        if n % 64 == 0 and stop():
            return None
        new_tables.append((oid, table))
        for name in table.defines:
            counts[name] = count(name) + 1
    now = {t.path for _, t in new_tables}
    for path in base:
        if path in files and path not in now:
            del files[path]
    for oid, table in new_tables:
        files[table.path] = (oid, table)

    def defined(name: str) -> bool:
        n = counts.get(name)
        return n > 0 if n is not None else name in names

    held_now: dict[str, set[str]] = {}
    for n, (oid, table) in enumerate(new_tables):
        if n % 64 == 0 and stop():
            return None
        held = held_now[table.path] = {name for name in table.names if defined(name)}
        _answer(cache, oid, table, held, load)
    # a holder set changes only by the names a path gained or lost: a common name (`run`, held
    # by every file) held on both sides of an edit is not copied
    for path in held_before.keys() | held_now.keys():
        was, now_held = held_before.get(path, set()), held_now.get(path, set())
        for name in was - now_held:
            holder_set(name).discard(path)
        for name in now_held - was:
            holder_set(name).add(path)
    # names new to the vocabulary, which files that did not change may hold
    came = {name for name, n in counts.items() if n and name not in before.names}
    if came:
        for n, (path, (oid, table)) in enumerate(files.items()):
            if n % 256 == 0 and stop():
                return None
            if path in texts or came.isdisjoint(table.names):
                continue
            held = came.intersection(table.names)
            _answer(cache, oid, table, held, load)
            for name in held:
                holder_set(name).add(path)
    # only what changed is written: a write copies the name's shard of the map (a few thousand
    # entries), and the young collections walk each copy until it is old; an edit that keeps what
    # its file defines (most do) leaves every count as it was
    for name in counts.keys() | holders.keys():
        n, entry = count(name), names.get(name)
        if not n:
            names.pop(name, None)   # SharedMap.pop copies no shard for a name it does not hold
        elif name in holders:
            names[name] = (n, tuple(holders[name]))
        elif entry is None or entry[0] != n:
            names[name] = (n, entry[1] if entry is not None else ())
    index = NameIndex(files, names)
    if key is not None:
        cache.keep_base_index(key, index)
    return index


def _whole(base: Mapping, cache: SymbolCache, load: Callable[[str], bytes],
           stop: Callable[[], bool]) -> NameIndex | None:
    """warm_base of a whole tree, with set operations in C where the incremental path asks
    name by name (a restart warms 100 000 files this way)."""
    tables = []
    for n, (oid, table) in enumerate(base_tables(base, cache, load)):
        if n % 64 == 0 and stop():
            return None
        tables.append((oid, table))
    counts: dict[str, int] = {}
    for _, table in tables:
        for name in table.defines:
            counts[name] = counts.get(name, 0) + 1
    vocabulary = set(counts)
    held_by: dict[str, list[str]] = {}
    for n, (oid, table) in enumerate(tables):
        if n % 64 == 0 and stop():
            return None
        held = vocabulary.intersection(table.names)
        _answer(cache, oid, table, held, load)
        for name in held:
            held_by.setdefault(name, []).append(table.path)
    return NameIndex({t.path: (oid, t) for oid, t in tables},
                     {name: (n, tuple(held_by.get(name, ()))) for name, n in counts.items()})


def _answer(cache: SymbolCache, oid: str, table: FileSymbols, names: set[str],
            load: Callable[[str], bytes]) -> None:
    wanted = names - table.mentions.keys()      # in C: a restart asks this of 100 000 tables
    if wanted:
        _warm(table, load(oid), wanted)
        cache.answered(table, oid)


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
