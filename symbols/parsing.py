"""Reading bytes safely: the checks that decide whether a grammar may see a file, and a parse
bounded in time.

py-tree-sitter 0.26 dropped `Parser.timeout_micros`; its `progress_callback` is the way to abort,
and it is only honoured when the source comes from a read callback (with a bytestring it is
ignored with a warning), so the bounded parse feeds the bytes through one. An aborted parse
raises ValueError.
"""
from __future__ import annotations

import threading
import time

from tree_sitter import Parser, Tree
from tree_sitter_language_pack import get_language

MAX_FILE_BYTES = 8 * 1024 * 1024
# A legitimate 8 MiB file parses in about two seconds here; the limit leaves room for a loaded
# machine and still stops a pathological input.
BASE_TIMEOUT_S = 2.0
TIMEOUT_S_PER_MIB = 0.75
_CHUNK = 1 << 20

_local = threading.local()


def parser_for(language: str) -> Parser:
    """One parser per language and thread: a Parser is not safe to share between threads."""
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(language)
    if parser is None:
        parser = parsers[language] = Parser(get_language(language))
    return parser


def time_limit(size: int) -> float:
    return BASE_TIMEOUT_S + TIMEOUT_S_PER_MIB * size / (1024 * 1024)


def parse_bounded(language: str, data: bytes, limit_s: float | None = None) -> Tree | None:
    """The tree of `data`, or None when the time limit ran out."""
    deadline = time.monotonic() + (time_limit(len(data)) if limit_s is None else limit_s)

    def read(offset: int, _point: tuple[int, int]) -> bytes:
        return data[offset:offset + _CHUNK]

    def progress(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline

    try:
        return parser_for(language).parse(read, progress_callback=progress)
    except ValueError:
        return None


def text_problem(data: bytes) -> str | None:
    """Why `data` is not text a grammar may read, or None."""
    if len(data) > MAX_FILE_BYTES:
        return f"over {MAX_FILE_BYTES} bytes"
    if b"\0" in data:
        return "binary (NUL byte)"
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            return f"invalid UTF-8 at byte {err.start}"
    return None
