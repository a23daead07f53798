"""The worker's symbol tables on disk: `$LONCA_HOME/symbols.db`, SQLite, one row a table.

A table is a pure function of a blob's bytes, its grammar and the engine that read it, so the
row's key is `FORMAT.ENGINE:language:blob id` and the value is symbols.cache.encode's bytes (the
table and the mentions it has learnt). A file written by another format or engine is emptied
when it is opened: its rows could never be read again. Nothing here is state: the file can be
deleted at any time, and the worker parses again.

Puts are queued and written by one thread, many rows a transaction (a warm from scratch makes
100 000 of them); gets read through a connection per thread (WAL: readers never wait for the
writer). A get finds what was put even before it is written (the queue is looked at first).
While a warm of a whole tree holds the writes (`holding`), puts only queue: each of its tables is
put when parsed and again once it has learnt its mentions, and the queue keeps the last put of a
key, so a table is written once, not twice (~100 us a row; a first warm of 20 000 files used
1.3-2.1 s less CPU, docs/decisions.md).
"""
from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lonca.symbols import SYMBOLS_ENGINE, FileSymbols
from lonca.symbols.cache import TABLE_FORMAT, Key, decode, encode

log = logging.getLogger("lonca.symbols")
_BATCH = 2000
_QUERY = 500        # keys a query (SQLite allows 32 766 parameters)
# A table with its mentions is 1-5 KB: on SQLite's default 4 KB pages many spilled to overflow
# pages, and reading a 100 000-file tree back (a restart) cost 2.5 s of CPU in the queries
# alone, 0.8 s on 16 KB pages (with 500 keys a query; the file shrank from 470 to 150 MB).
PAGE_SIZE = 16384


def _version(con: sqlite3.Connection) -> str | None:
    try:
        row = con.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
    except sqlite3.Error:   # no such table: a new file
        return None
    return row[0] if row is not None else None


def _key(key: Key) -> str:
    return f"{TABLE_FORMAT}.{SYMBOLS_ENGINE}:{key[1] or ''}:{key[0]}"


class SqliteTables:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._pending: dict[str, tuple[int, FileSymbols]] = {}    # key -> (put number, table)
        self._puts = 0
        self._cond = threading.Condition()
        self._closing = False
        self._holding = 0       # warms holding the writes back
        self.rows_written = 0
        version = f"{TABLE_FORMAT}.{SYMBOLS_ENGINE}:{PAGE_SIZE}"
        con = self._connect()
        if _version(con) != version:    # another format, engine or page size: start a new file
            con.close()
            self._local.con = None
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                leftover.unlink(missing_ok=True)
            con = self._connect()
            with con:
                con.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
                con.execute("CREATE TABLE tables (key TEXT PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID")
                con.execute("INSERT INTO meta VALUES ('version', ?)", (version,))
        self._writer = threading.Thread(target=self._write, name="lonca-symbols-db", daemon=True)
        self._writer.start()

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            con.execute(f"PRAGMA page_size={PAGE_SIZE}")  # only a new file takes it (before WAL)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")   # a lost row is parsed again, never wrong
            con.execute("PRAGMA busy_timeout=10000")   # a first warm's process writes too
            self._local.con = con
        return con

    def get(self, key: Key) -> FileSymbols | None:
        k = _key(key)
        with self._cond:
            queued = self._pending.get(k)
        if queued is not None:
            return queued[1]
        try:
            row = self._connect().execute("SELECT data FROM tables WHERE key = ?", (k,)).fetchone()
            return decode(row[0]) if row is not None else None
        except (sqlite3.Error, ValueError, EOFError, TypeError, IndexError) as e:
            log.warning("reading a symbol table from %s failed (%s); parsing instead", self.path, e)
            return None

    def get_many(self, keys: list[Key]) -> dict[Key, FileSymbols]:
        """The tables found of `keys`, a few hundred a query."""
        wanted = {_key(k): k for k in keys}
        out: dict[Key, FileSymbols] = {}
        with self._cond:
            for k, key in wanted.items():
                if k in self._pending:
                    out[key] = self._pending[k][1]
        rest = [k for k in wanted if wanted[k] not in out]
        con = self._connect()
        try:
            for i in range(0, len(rest), _QUERY):
                chunk = rest[i:i + _QUERY]
                marks = ",".join("?" * len(chunk))
                for k, data in con.execute(f"SELECT key, data FROM tables WHERE key IN ({marks})", chunk):
                    table = decode(data)
                    if table is not None:
                        out[wanted[k]] = table
        except (sqlite3.Error, ValueError, EOFError, TypeError, IndexError) as e:
            log.warning("reading symbol tables from %s failed (%s); parsing instead", self.path, e)
        return out

    def put(self, key: Key, table: FileSymbols) -> None:
        with self._cond:
            self._puts += 1     # a table put again (it learnt mentions) is written again
            self._pending[_key(key)] = (self._puts, table)
            if len(self._pending) >= _BATCH:
                self._cond.notify()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Puts made meanwhile are queued, not written, until the block ends (or the store
        closes): a key put twice in it is written once."""
        with self._cond:
            self._holding += 1
        try:
            yield
        finally:
            with self._cond:
                self._holding -= 1
                self._cond.notify_all()

    def _write(self) -> None:
        con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute("PRAGMA busy_timeout=10000")
        while True:
            with self._cond:
                if (not self._pending or self._holding) and not self._closing:
                    self._cond.wait(0.5)
                if self._holding and not self._closing:
                    continue    # a warm holds the writes: its block's end notifies
                batch = list(self._pending.items())[:_BATCH]
                if not batch and self._closing:
                    break
            if batch:
                try:
                    rows = [(k, encode(t)) for k, (_, t) in batch]
                    with con:
                        con.executemany("INSERT OR REPLACE INTO tables VALUES (?, ?)", rows)
                    self.rows_written += len(rows)
                except (sqlite3.Error, RuntimeError) as e:  # RuntimeError: mentions grew meanwhile
                    log.warning("writing symbol tables to %s failed: %s", self.path, e)
                except Exception:  # a cache: the batch is dropped below, the thread goes on
                    log.exception("writing symbol tables to %s failed", self.path)
                with self._cond:
                    for k, put in batch:
                        if self._pending.get(k) is put:
                            del self._pending[k]
                    self._cond.notify_all()
        con.close()

    def count(self) -> int:
        return self._connect().execute("SELECT count(*) FROM tables").fetchone()[0]

    def close(self, timeout_s: float = 0.5) -> None:
        """Write what is queued, for at most `timeout_s` (the rest is parsed again later)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._writer.join(timeout_s)
