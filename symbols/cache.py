"""Symbol tables by blob id, so that each blob is read and parsed once.

The key is the blob id and the grammar its path selects: one blob under `a.py` and `a.txt` gives
two tables. Ids hold the path, so a table met again under another path of the same grammar is
re-labelled, not re-parsed.

A blob that replaces another at a path, whose table is held, gets its table spliced from that one,
parsing only around the edit (symbols/splice.py). Where that cannot be vouched for, the trees of
recently parsed blobs help: they are kept up to their estimated size in memory (a tree takes
about 40 times its source: tree_bytes): a blob that replaces one of them at a path is parsed
incrementally from the old tree, several times faster than from scratch.

The tables held are bounded by their estimated size in memory (table_bytes), not by their
count: one table of a 300 KB file weighs as much as a thousand of a small one. Behind them may
stand a `TableStore` (the worker's, on disk), asked before a blob is read and parsed and told of
every table made: a restarted worker reads its tables back instead of parsing them again.
`encode`/`decode` are the tables' bytes there.
"""
from __future__ import annotations

import dataclasses
import pickle
import threading
from collections import OrderedDict
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Protocol

from tree_sitter import Tree

from .languages import language_of
from .parsing import edited
from .splice import spliced_table
from .table import NOT_NAMES, SYMBOLS_ENGINE, FileSymbols, Symbol, parsed_table

if TYPE_CHECKING:
    from .mentions import NameIndex

# Estimated memory of the tables held (table_bytes). The index of a base (mentions.NameIndex) holds
# every table of its tree whatever this bound, so it bounds the rest: tables of proposals' blobs
# and of versions trunk left behind, read back from the store on disk when asked for again. At
# 512 MiB those were what a worker's memory grew by, by the thousand a minute of proposals; at 64
# MiB still, for the 16,000 proposals it took to fill (the soak bench's ten minutes). What is
# asked again is a proposal's table when it lands (seconds later) and a base's, which its index
# holds (facts read it there, and splice the new version from it).
DEFAULT_TABLE_BYTES = 16 * 1024 * 1024
DEFAULT_TREE_BYTES = 32 * 1024 * 1024  # estimated memory of the trees kept (tree_bytes); RSS is about twice that
TREE_BYTES_PER_SOURCE_BYTE = 40  # measured with tracemalloc: 21x (standard library) to 43x (small modules)
# What a repository of N files gets (fit): N x these, between the floors and the bounds above. A
# trunk of 10,000 small files filled the fixed bounds with the tables and trees of blobs history
# left behind (every edit is a new blob), ~100 MB of RSS it did not need; from 32,000 files on
# (the 100,000-file scale bench) the bounds are the fixed ones, as before.
TABLE_BYTES_PER_FILE = 512
TREE_BYTES_PER_FILE = 1024
TABLE_BYTES_FLOOR = 4 * 1024 * 1024
TREE_BYTES_FLOOR = 8 * 1024 * 1024
_MAX_PATHS_PER_BLOB = 8
_MAX_BASES = 8
# below this a whole parse is cheaper than the splice's two parses of ranges and its checks
# (measured on this repository's own modules: 0.17-0.65 ms whole against 0.36-0.86 spliced
# under 3 KB, the splice ahead from ~5 KB); a preview judged on the event loop pays it there
SPLICE_MIN_BYTES = 3 * 1024

TABLE_FORMAT = 1          # the layout of encode(); with SYMBOLS_ENGINE, what a stored table is valid for
Key = tuple[str, "str | None"]       # (blob id, language)


class TableStore(Protocol):
    """Tables kept outside memory, by (blob id, language); what was put may be got back."""

    def get(self, key: Key) -> FileSymbols | None: ...

    def get_many(self, keys: list[Key]) -> dict[Key, FileSymbols]: ...

    def put(self, key: Key, table: FileSymbols) -> None: ...

    def holding(self) -> AbstractContextManager[None]:
        """Puts made in the block may be written once it ends: one put a key, the last."""
        ...


class SymbolCache:
    def __init__(self, max_bytes: int = DEFAULT_TABLE_BYTES,
                 tree_bytes: int = DEFAULT_TREE_BYTES, store: TableStore | None = None) -> None:
        self._max_bytes = self._bound_bytes = max_bytes
        self._bytes = 0
        self._files = 0     # the files of the largest base fitted to
        self._blobs: OrderedDict[Key, dict[str, FileSymbols]] = OrderedDict()
        self.store = store
        self._max_tree_bytes = self._bound_tree_bytes = tree_bytes
        self._tree_bytes = 0
        self._trees: OrderedDict[tuple[str, str | None], tuple[bytes, Tree]] = OrderedDict()
        self._bases: OrderedDict[str, NameIndex] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._blobs)

    def table(self, path: str, oid: str, load: Callable[[], bytes], base: str | None = None,
              base_data: bytes | None = None, keep_tree: bool = True,
              base_table: FileSymbols | None = None) -> FileSymbols:
        """The table of blob `oid` at `path`; `base` is the blob it replaces there (its bytes in
        `base_data`, when the caller has them): the new table is spliced from the base's
        (symbols/splice.py), or else parsed starting from the base's kept tree, if any. The
        base's table is the one held here, or else `base_table` (a base's index holds the tables
        of its tree when this cache no longer does).
        `keep_tree=False` when the blob is one of a whole tree read at once (a first warm): its
        tree would push out those of blobs just edited, for a file nobody is editing."""
        key = (oid, language_of(path))
        with self._lock:
            by_path = self._blobs.get(key)
            if by_path is not None:
                self._blobs.move_to_end(key)
                self.hits += 1
                found = by_path.get(path)
                if found is not None:
                    return found
        if by_path is None:
            stored = self.store.get(key) if self.store is not None else None
            if stored is not None:
                table = stored if stored.path == path else relabel(stored, path)
            else:
                self.misses += 1
                data = load()
                table = self._spliced(path, key[1], base, base_data, data, base_table)
                if table is None:
                    table, tree = parsed_table(path, data, old=self._edited(base, key[1], data))
                    if tree is not None and keep_tree:
                        self._keep(key, data, tree)
                if self.store is not None:
                    self.store.put(key, table)
        else:
            table = relabel(next(iter(by_path.values())), path)
        with self._lock:
            self._hold(key, path, table)
        return table

    def stored(self, entries: list[tuple[str, str]]) -> list[FileSymbols | None]:
        """held(), and what the store has of the rest, asked for all at once (a restart reads
        a whole tree's tables back: one query per file cost as much as decoding them)."""
        out = self.held(entries)
        assert out is not None  # waited for the lock
        missing = [i for i, t in enumerate(out) if t is None]
        if self.store is None or not missing:
            return out
        keys = [(entries[i][1], language_of(entries[i][0])) for i in missing]
        found = self.store.get_many(keys)
        with self._lock:
            for i, key in zip(missing, keys):
                table = found.get(key)
                if table is not None:
                    path = entries[i][0]
                    out[i] = table = table if table.path == path else relabel(table, path)
                    self._hold(key, path, table)
        return out

    def _hold(self, key: Key, path: str, table: FileSymbols) -> None:
        """Under the lock: keep `table`, and drop the least recently used past the bound."""
        by_path = self._blobs.get(key)
        if by_path is None:
            by_path = self._blobs[key] = {}
        if len(by_path) < _MAX_PATHS_PER_BLOB and path not in by_path:
            by_path[path] = table
            self._bytes += table_bytes(table)
        self._drop_tables()

    def _drop_tables(self) -> None:
        """Under the lock: the least recently used tables go, down to the bound (one stays)."""
        while self._bytes > self._max_bytes and len(self._blobs) > 1:
            for gone in self._blobs.popitem(last=False)[1].values():
                self._bytes -= table_bytes(gone)

    def _drop_trees(self) -> None:
        """Under the lock: the least recently used trees go, down to the bound."""
        while self._tree_bytes > self._max_tree_bytes:
            self._tree_bytes -= tree_bytes(self._trees.popitem(last=False)[1][0])

    def fit(self, files: int) -> None:
        """Bound the tables and trees held by the files of the largest base warmed (a repository
        of `files` files gets files x TABLE_BYTES_PER_FILE and x TREE_BYTES_PER_FILE, between
        the floors and the bounds this cache was made with), and drop what is over."""
        with self._lock:
            self._files = max(self._files, files)
            self._max_bytes = min(self._bound_bytes, max(TABLE_BYTES_FLOOR, TABLE_BYTES_PER_FILE * self._files))
            self._max_tree_bytes = min(self._bound_tree_bytes, max(TREE_BYTES_FLOOR, TREE_BYTES_PER_FILE * self._files))
            self._drop_tables()
            self._drop_trees()

    def holding_puts(self) -> AbstractContextManager[None]:
        """The store's `holding` (a warm of a whole tree puts each table twice: parsed, then
        with its mentions)."""
        return self.store.holding() if self.store is not None else nullcontext()

    def answered(self, table: FileSymbols, oid: str) -> None:
        """`table` learnt mentions (mentions.py): the store keeps them too."""
        if self.store is not None:
            self.store.put((oid, table.language), table)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def held(self, entries: list[tuple[str, str]], wait: bool = True) -> list[FileSymbols | None] | None:
        """The tables already held for (path, oid) pairs, None where a table is not: a pass over
        a whole tree takes the lock once, not once a file. `wait=False` (the event loop): None
        at once while a thread holds the lock; waiting, the loop waited for that thread to get
        the GIL back and finish, behind every other thread running Python."""
        out: list[FileSymbols | None] = []
        blobs, touch = self._blobs, self._blobs.move_to_end
        if not self._lock.acquire(wait):
            return None
        try:
            for path, oid in entries:
                key = (oid, language_of(path))
                by_path = blobs.get(key)
                found = None if by_path is None else by_path.get(path)
                if found is not None:
                    touch(key)
                out.append(found)
            self.hits += len(out) - out.count(None)
        finally:
            self._lock.release()
        return out

    def base_index(self, key: str, wait: bool = True) -> NameIndex | None:
        """The index kept for the base `key` names (keep_base_index), if any; `wait=False` as
        for `held`."""
        if not self._lock.acquire(wait):
            return None
        try:
            index = self._bases.get(key)
            if index is not None:
                self._bases.move_to_end(key)
            return index
        finally:
            self._lock.release()

    def keep_base_index(self, key: str, index: NameIndex) -> None:
        """Keep `index` for the base that `key` names (a commit or tree id: one key, one
        tree, always); the last few bases are kept."""
        with self._lock:
            self._bases[key] = index
            self._bases.move_to_end(key)
            while len(self._bases) > _MAX_BASES:
                self._bases.popitem(last=False)

    def _spliced(self, path: str, language: str | None, base: str | None,
                 base_data: bytes | None, data: bytes, base_table: FileSymbols | None) -> FileSymbols | None:
        if base is None or len(data) < SPLICE_MIN_BYTES:
            return None
        with self._lock:
            by_path = self._blobs.get((base, language))
            old = None if by_path is None else by_path.get(path)
            if base_data is None and (base, language) in self._trees:
                base_data = self._trees[(base, language)][0]
        if old is None and base_table is not None and base_table.path == path and base_table.language == language:
            old = base_table
        if old is None or base_data is None:
            return None
        return spliced_table(path, old, base_data, data)

    def _edited(self, base: str | None, language: str | None, data: bytes) -> Tree | None:
        if base is None:
            return None
        with self._lock:
            kept = self._trees.get((base, language))
            if kept is None:
                return None
            self._trees.move_to_end((base, language))
        return edited(kept[1], kept[0], data)

    def _keep(self, key: tuple[str, str | None], data: bytes, tree: Tree) -> None:
        if tree_bytes(data) > self._max_tree_bytes:
            return
        with self._lock:
            if key in self._trees:
                return
            self._trees[key] = (data, tree)
            self._tree_bytes += tree_bytes(data)
            self._drop_trees()


def tree_bytes(data: bytes) -> int:
    """About what the tree of `data` takes in memory."""
    return TREE_BYTES_PER_SOURCE_BYTE * len(data)


def table_bytes(table: FileSymbols) -> int:
    """About what `table` takes in memory (measured with tracemalloc over the standard
    library and generated modules: within 15 %)."""
    return 1000 + 700 * table.symbol_count + 100 * len(table.names)


_FIELDS = [f.name for f in dataclasses.fields(Symbol)]
_TABLE_FIELDS = [f.name for f in dataclasses.fields(FileSymbols) if f.compare]


def encode(table: FileSymbols) -> bytes:
    """The table and the mentions it has learnt, as bytes (plain tuples, pickled)."""
    symbols = [tuple(getattr(s, f) for f in _FIELDS) for s in table.symbols]
    return pickle.dumps((TABLE_FORMAT, SYMBOLS_ENGINE, table.path, table.language, table.status, symbols,
                         table.syntax_errors, tuple(table.names), table.import_rows, table.line_count,
                         table.wraps, dict(table.mentions)), protocol=5)


def decode(data: bytes) -> FileSymbols | None:
    """encode's table; None for bytes of another format or engine."""
    row = pickle.loads(data)
    if row[0] != TABLE_FORMAT or row[1] != SYMBOLS_ENGINE:
        return None
    (_, _, path, language, status, symbols, errors, names, imports, lines, wraps, mentions) = row
    table = StoredTable(path, language, status, symbols, errors, frozenset(names), imports, lines, wraps)
    table.mentions.update(mentions)
    return table


class _SymbolsWhenAsked:
    """StoredTable.symbols: the rows as decoded are kept, and made Symbols when first read."""

    def __set__(self, table: "StoredTable", rows: list) -> None:
        if rows and isinstance(rows[0], Symbol):   # made again from a table's fields (dataclasses.replace)
            table.__dict__["_symbols"] = rows
        table.__dict__["_rows"] = rows

    def __get__(self, table: "StoredTable | None", owner: type) -> list[Symbol]:
        if table is None:
            return self  # type: ignore[return-value]
        made = table.__dict__.get("_symbols")
        if made is None:
            made = table.__dict__["_symbols"] = [Symbol(*row) for row in table.__dict__["_rows"]]
        return made


_DEFINES = (_FIELDS.index("name"), _FIELDS.index("kind"))


class StoredTable(FileSymbols):
    """A table read back from disk (decode), the same as the one put but for its class. Its
    Symbols are made when first read: a restart reads a whole tree's tables back and its warm
    reads only their names and what they define (making 800 000 Symbols cost 2.5 s of CPU at
    100 000 files, most of what reading them back cost)."""

    symbols = _SymbolsWhenAsked()   # type: ignore[assignment]

    @property
    def symbol_count(self) -> int:
        return len(self.__dict__["_rows"])

    @cached_property
    def defines(self) -> frozenset[str]:
        if "_symbols" in self.__dict__:
            return super().defines
        name, kind = _DEFINES
        return frozenset(row[name] for row in self.__dict__["_rows"] if row[kind] not in NOT_NAMES)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileSymbols):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _TABLE_FIELDS)

    __hash__ = None     # type: ignore[assignment]  # as FileSymbols': its symbols are a list


def relabel(table: FileSymbols, path: str) -> FileSymbols:
    """The same table under another path."""
    old = table.path
    symbols = [dataclasses.replace(s, id=f"{path}#{s.qualified}") for s in table.symbols]
    errors = [path + e[len(old):] if e.startswith(old) else e for e in table.syntax_errors]
    return FileSymbols(path, table.language, table.status, symbols, errors, table.names,
                       table.import_rows, table.line_count, table.wraps)
