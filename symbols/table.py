"""Symbol tables: `symbol_table(path, data)` -> FileSymbols.

Ids are `path#Qualified.name`; names shared by siblings take the overload key when the keys tell
them apart, and are numbered in file order (`init`, `init~2`) for whatever is still alike. A
section's name may hold dots, `~` or `<file>`: an id of a section language that is already taken
in the file (or is a reserved one: `<file>`, `Section.<append>`) is numbered the same way
(`UniqueIds`).
Every file has `path#<file>`, whose hash covers the text outside its top-level symbols; every
type has `path#Type.<def>` for its text apart from its members.

Hashes are blake2b-128, lowercase hex:
- signature_hash: the text from the decorators/attributes to the body, whitespace collapsed, so
  re-wrapping parameters is not a new signature;
- body_hash: the rest of the symbol's text (leading comments and body), as is;
- def_hash / section bodies / `<file>`: own text with trailing spaces and blank lines dropped,
  so a member added with blank lines around it does not change its container.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from tree_sitter import Node, Tree

from .languages import LANGS, SECTION_LANGUAGES, language_of
from .outline import FUNCTION_KINDS, Outline, Raw, outline, own_ranges, spans_of
from .parsing import parse_bounded, text_problem
from .sections import SECTION_KINDS, section_outline

SYMBOLS_ENGINE = 18
FILE = "<file>"
DEF = "<def>"
APPEND = "<append>"    # the facts' addition at the end of a section
MAX_SYNTAX_ERRORS = 5
# kinds whose names are never looked for: they are not called or referred to by name
NOT_NAMES = frozenset({"file", "def", "impl"}) | SECTION_KINDS
_IDENT = re.compile(r"[A-Za-z_$\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")


@dataclass(frozen=True, slots=True)
class Symbol:
    id: str
    name: str
    qualified: str
    kind: str
    parent: str | None
    start_byte: int
    end_byte: int
    start_line: int         # 1-based, leading comments and decorators included
    end_line: int
    signature_hash: str
    body_hash: str
    def_hash: str | None = None
    def_line: int = 0       # line of the definition itself (what ctags reports)
    sig_start: int = 0      # the signature is [sig_start, sig_end); renames compare it
    sig_end: int = 0
    test: bool = False
    skipped: bool = False

    @property
    def is_function(self) -> bool:
        return self.kind in FUNCTION_KINDS

    @property
    def container(self) -> str:
        """The id of what holds it as written (`path#<file>` at the top): a name may hold dots,
        so this is never read back from the id."""
        return f"{self.id[:len(self.id) - len(self.qualified)]}{self.parent or FILE}"


@dataclass(frozen=True)
class FileSymbols:
    path: str
    language: str | None
    status: str             # "parsed" | "unparsed" (no grammar) | "unread" (grammar failed) | "opaque" (not to be read)
    symbols: list[Symbol]
    syntax_errors: list[str]
    names: frozenset[str]   # identifiers the file mentions (a superset once spliced)
    import_rows: tuple[tuple[int, int], ...] = ()  # 0-based row ranges of import statements
    line_count: int = 0
    wraps: tuple[tuple[int, int, int, int], ...] = ()   # outline.Outline.wraps

    @property
    def symbol_count(self) -> int:
        return len(self.symbols)

    @cached_property
    def defines(self) -> frozenset[str]:
        """The names its symbols define that a change can be asked about (mentions.warm_base's
        vocabulary)."""
        return frozenset(s.name for s in self.symbols if s.kind not in NOT_NAMES)

    @cached_property
    def by_id(self) -> dict[str, Symbol]:
        """Made when the facts first ask: a restart reads 100 000 tables back and asks few."""
        return {s.id: s for s in self.symbols}

    @property
    def file_id(self) -> str:
        return f"{self.path}#{FILE}"

    @cached_property
    def spans(self) -> tuple[list[Symbol], list[int]]:
        """Symbols with a text of their own, by start (outer first), and their starts: where
        the facts look up which symbol holds a byte."""
        spans = sorted((s for s in self.symbols if s.kind not in ("def", "file")),
                       key=lambda s: (s.start_byte, -s.end_byte))
        return spans, [s.start_byte for s in spans]

    @cached_property
    def mentions(self) -> dict[str, tuple[str, ...]]:
        """name -> ids of the symbols that mention it (symbols/mentions.py), filled as names
        are asked for, so a warm base answers `affected` without reading its blobs again.
        Tuples of strings, which the garbage collector stops tracking, not sets it would walk
        through on every full collection."""
        return {}


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def normalize(data: bytes) -> bytes:
    return b"\n".join(line.rstrip() for line in data.splitlines() if line.strip())


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def symbol_table(path: str, data: bytes, timeout_s: float | None = None) -> FileSymbols:
    """The symbols of one file. Never raises on content: a file no grammar reads is
    "unparsed", one its grammar cannot read is "unread", both with only `path#<file>`."""
    return parsed_table(path, data, timeout_s)[0]


def parsed_table(path: str, data: bytes, timeout_s: float | None = None,
                 old: Tree | None = None) -> tuple[FileSymbols, Tree | None]:
    """`symbol_table` and the tree it was read from (None when nothing was parsed); `old`, an
    earlier tree edited to match `data` (parsing.edited), makes the parse incremental."""
    language = language_of(path)
    problem = text_problem(data, language)
    if language is None:
        return whole_file(path, None, "unparsed", data, []), None
    if problem is not None:
        return whole_file(path, language, "unread", data, [f"{path}: {problem}"]), None
    tree = parse_bounded(language, data, timeout_s, old)
    if tree is None:
        return whole_file(path, language, "unread", data, [f"{path}: parse timed out"]), None
    root = tree.root_node
    if root.has_error:
        return whole_file(path, language, "unread", data, syntax_errors(path, root)), tree
    if language in SECTION_LANGUAGES:
        found = Outline(section_outline(language, root, data), [], [])
    else:
        found = outline(root, LANGS[language], data)
    symbols: list[Symbol] = []
    emit(found.raws, None, path, data, symbols,
         UniqueIds() if language in SECTION_LANGUAGES else None)
    # members declared outside their type (Go methods, Rust impls) are not the file's own text
    symbols.append(file_symbol(path, data, root.end_point.row, spans_of(_flatten(found.raws))))
    return FileSymbols(path, language, "parsed", symbols, [], identifiers(data),
                       tuple(found.imports), count_lines(data), tuple(sorted(found.wraps))), tree


def file_symbol(path: str, data: bytes, end_row: int, spans: list[tuple[int, int]]) -> Symbol:
    """`path#<file>`: the text outside the spans of the file's symbols."""
    return Symbol(f"{path}#{FILE}", FILE, FILE, "file", None, 0, len(data), 1, end_row + 1,
                  digest(b""), own_digest(data, 0, len(data), spans))


def identifiers(data: bytes) -> frozenset[str]:
    """The identifiers in `data` (a slice may cut a character at its ends: replaced)."""
    return frozenset(_IDENT.findall(data.decode("utf-8", "replace")))


def whole_file(path: str, language: str | None, status: str, data: bytes,
               errors: list[str]) -> FileSymbols:
    """A file seen as one symbol, `path#<file>`; a binary file counts no lines."""
    lines = 0 if b"\0" in data else count_lines(data)
    sym = Symbol(f"{path}#{FILE}", FILE, FILE, "file", None, 0, len(data), 1, max(1, lines),
                 digest(b""), digest(data))
    return FileSymbols(path, language, status, [sym], errors, frozenset(), (), lines)


def opaque_file(path: str, language: str | None) -> FileSymbols:
    """A file whose contents are not to be read (its caller says which: Lonca's redacted blobs):
    one symbol, `path#<file>`, and no lines, so nothing in it is named or counted."""
    return whole_file(path, language, "opaque", b"", [])


def syntax_errors(path: str, root: Node) -> list[str]:
    """The first few ERROR/MISSING nodes, found by descending only where errors are."""
    found: list[str] = []
    stack = [root]
    while stack and len(found) < MAX_SYNTAX_ERRORS:
        node = stack.pop()
        if node.is_error or node.is_missing:
            row, col = node.start_point
            what = f"missing {node.type}" if node.is_missing else "syntax error"
            found.append(f"{path}:{row + 1}:{col + 1}: {what}")
            continue
        stack.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)
    return found or [f"{path}: syntax error"]


def _display_names(raws: list[Raw]) -> list[str]:
    """Unique names among siblings: the key when it tells a name apart, then ~N."""
    groups: dict[tuple[str | None, str], list[Raw]] = {}
    for r in raws:
        groups.setdefault((r.owner, r.name), []).append(r)
    shown: dict[int, str] = {}
    for group in groups.values():
        if len(group) == 1:
            shown[id(group[0])] = group[0].name
            continue
        keys = [r.key for r in group]
        for r in group:
            unique_key = r.key is not None and keys.count(r.key) == 1
            shown[id(r)] = r.name + r.key if unique_key else r.name
    seen: dict[tuple[str | None, str], int] = {}
    out = []
    for r in raws:
        name = shown[id(r)]
        n = seen[(r.owner, name)] = seen.get((r.owner, name), 0) + 1
        out.append(name if n == 1 else f"{name}~{n}")
    return out


class UniqueIds:
    """The qualified names a file has given out, and the next number to try for each.

    A section's name is its heading or key as written, so `Release.1.2` at the top and
    `Release` > `1` > `2` spell one id, as do a heading `<file>` and the file's own symbol, or
    a subsection `<append>` and the facts' addition to its section. The later one in file order
    takes the seed's `~N` (`Release.1.2~2`), as siblings alike do (`bin`, `bin~2`), and the
    number counts on from the last one given (`a.b`, `a.b~2`, `a.b~3`): ids of names without
    such a clash stay as they were. Not for code: a spliced table reads only part of a file."""

    def __init__(self) -> None:
        self.taken = {FILE}
        self.next: dict[str, int] = {}

    def claim(self, qualified: str, kind: str) -> str:
        if qualified in self.taken:
            n = self.next.get(qualified, 2)
            while f"{qualified}~{n}" in self.taken:
                n += 1
            self.next[qualified] = n + 1
            qualified = f"{qualified}~{n}"
        self.taken.add(qualified)
        if kind == "section":
            self.taken.add(f"{qualified}.{APPEND}")
        return qualified


def emit(raws: list[Raw], parent: str | None, path: str, data: bytes,
         out: list[Symbol], ids: UniqueIds | None = None) -> None:
    """Symbols of `raws` (and their members, depth first) under `parent`, onto `out`; with
    `ids`, every id is unique in the file whatever the names hold."""
    # with `ids` (no keys), names alike are numbered by `ids`, across the file
    names = [r.name for r in raws] if ids is not None else _display_names(raws)
    for raw, name in zip(raws, names):
        scope = parent
        if raw.owner:
            scope = f"{parent}.{raw.owner}" if parent else raw.owner
        qualified = f"{scope}.{name}" if scope else name
        if ids is not None:
            qualified = ids.claim(qualified, raw.kind)
        signature = digest(b" ".join(data[raw.head:raw.sig_end].split()))
        def_hash = None
        if raw.kind in SECTION_KINDS:
            body = own_digest(data, raw.start, raw.end, spans_of(raw.members))
        else:
            body = body_digest(data, raw.start, raw.head, raw.sig_end, raw.end)
            if raw.container and not raw.own_in_parent:
                def_hash = own_digest(data, raw.start, raw.end, spans_of(raw.members),
                                      sorted(raw.extra_own))
        sym = Symbol(f"{path}#{qualified}", raw.name, qualified, raw.kind, scope, raw.start,
                     raw.end, raw.start_row + 1, raw.end_row + 1, signature, body, def_hash,
                     raw.def_row + 1, raw.head, raw.sig_end, raw.test, raw.skipped)
        out.append(sym)
        if def_hash is not None:
            out.append(Symbol(f"{path}#{qualified}.{DEF}", DEF, f"{qualified}.{DEF}", "def",
                              qualified, raw.start, raw.end, sym.start_line, sym.end_line,
                              signature, def_hash, None, sym.def_line, raw.head, raw.sig_end))
        emit(raw.members, qualified, path, data, out, ids)


def _flatten(raws: list[Raw]) -> list[Raw]:
    out, stack = [], list(raws)
    while stack:
        r = stack.pop()
        out.append(r)
        stack.extend(r.members)
    return out


def body_digest(data: bytes, start: int, head: int, sig_end: int, end: int) -> str:
    """A symbol's body_hash: its text but the signature [head, sig_end)."""
    return digest(data[start:head] + data[sig_end:end])


def own_digest(data: bytes, start: int, end: int, members: list[tuple[int, int]],
               extra: Sequence[tuple[int, int]] = ()) -> str:
    """A type's def_hash, a section's body: [start, end) without its members' spans, then the
    `extra` spans of its own elsewhere (a Rust impl's), normalized."""
    own = cut(data, start, end, members) + b"".join(data[s:e] for s, e in extra)
    return digest(normalize(own))


def cut(data: bytes, start: int, end: int, spans: list[tuple[int, int]]) -> bytes:
    """data[start:end] without the spans inside it."""
    return b"".join(data[s:e] for s, e in own_ranges(start, end, spans))
