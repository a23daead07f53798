"""Symbol tables by blob id, so that each blob is read and parsed once.

The key is the blob id and the grammar its path selects: one blob under `a.py` and `a.txt` gives
two tables. Ids hold the path, so a table met again under another path of the same grammar is
re-labelled, not re-parsed.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Callable

from .languages import language_of
from .table import FileSymbols, symbol_table

DEFAULT_MAX_BLOBS = 200_000
_MAX_PATHS_PER_BLOB = 8


class SymbolCache:
    def __init__(self, max_blobs: int = DEFAULT_MAX_BLOBS) -> None:
        self._max = max_blobs
        self._blobs: OrderedDict[tuple[str, str | None], dict[str, FileSymbols]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._blobs)

    def table(self, path: str, oid: str, load: Callable[[], bytes]) -> FileSymbols:
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
            self.misses += 1
            table = symbol_table(path, load())
        else:
            table = relabel(next(iter(by_path.values())), path)
        with self._lock:
            by_path = self._blobs.setdefault(key, {})
            if len(by_path) < _MAX_PATHS_PER_BLOB:
                by_path[path] = table
            while len(self._blobs) > self._max:
                self._blobs.popitem(last=False)
        return table


def relabel(table: FileSymbols, path: str) -> FileSymbols:
    """The same table under another path."""
    old = table.path
    symbols = [dataclasses.replace(s, id=f"{path}#{s.qualified}") for s in table.symbols]
    errors = [path + e[len(old):] if e.startswith(old) else e for e in table.syntax_errors]
    return FileSymbols(path, table.language, table.status, symbols, errors, table.names,
                       table.import_rows, table.line_count)
