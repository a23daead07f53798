"""The facts of a change: two trees (path -> blob id and mode) -> what it edits, adds, deletes,
renames, gives a new signature, and which symbols of the base mention what it breaks.

Decisions (the seed's "Common shapes" is the spec; these settle what it leaves open):
- edits: symbols in both trees whose text changed. A type is compared through `Type.<def>` and
  its members, never as a whole (a Rust impl likewise); `path#<file>` when the text outside
  top-level symbols changed.
- adds/deletes: symbols in one tree only, types with their members, never `<def>`. An added or
  deleted file brings all its symbols and its `path#<file>`. A file that no grammar reads, or
  that its grammar cannot read on either side, is compared whole: `path#<file>`.
- signature_changes: functions and methods whose signature text (decorators to body,
  whitespace collapsed) changed.
- renames: a deleted symbol and an added one of the same kind under the same parent (after
  renaming the parent) whose texts, each with its own name blanked, match at RENAME_SIMILARITY
  or more, each the other's only candidate, within one file. A rename that also changed the
  signature puts the new id in edits.
- Appending to the end of a Markdown section's own text is `path#Section.<append>` in adds.
- import_only_files: modified files read on both sides whose changed lines are all within
  import statements (or blank).
- tests: test symbols (symbols/languages.py) added, modified (edited), deleted, and skipped (a
  test that is skipped now and was not before, or is added skipped).
- affected: leaf symbols of the base (functions, methods, `Type.<def>`, `path#<file>`) whose
  text holds, as a whole identifier, the bare name of a symbol the change deletes, renames or
  gives a new signature; the changed symbols themselves are not listed.
- lines_added/lines_removed: line diff counts; binary files count none.
- containers and nesting (not facts of the protocol, the worker's reading of them): each added
  symbol's container id and name as its table wrote them (every id in adds but `<append>`s),
  and for files of section languages, whose names may hold dots, the container of each symbol
  of either side (the base's where both have it): leases decide insert containers and
  containment from these, not from the ids' dots.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple

from .cache import SymbolCache
from .languages import SECTION_LANGUAGES, language_of
from .mentions import NameIndex, mentioned
from .table import APPEND, NOT_NAMES, FileSymbols, Symbol, cut, normalize, opaque_file, whole_file
from .textdiff import changed_rows
from .trees import TreeEntry, mode_word

MAX_AFFECTED = 1000
RENAME_SIMILARITY = 0.6


@dataclass
class Facts:
    edits: set[str] = field(default_factory=set)
    adds: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)
    renames: list[tuple[str, str]] = field(default_factory=list)
    signature_changes: set[str] = field(default_factory=set)
    deleted_files: set[str] = field(default_factory=set)
    added_files: set[str] = field(default_factory=set)
    modified_files: set[str] = field(default_factory=set)
    import_only_files: set[str] = field(default_factory=set)
    lines_added: int = 0
    lines_removed: int = 0
    tests: dict[str, set[str]] = field(default_factory=lambda: {
        "added": set(), "modified": set(), "deleted": set(), "skipped": set()})
    unparsed_files: set[str] = field(default_factory=set)
    unread_files: set[str] = field(default_factory=set)
    affected: list[str] = field(default_factory=list)
    affected_more: int = 0
    syntax_errors: list[str] = field(default_factory=list)  # a note for the answer, not a fact
    containers: dict[str, tuple[str, str]] = field(default_factory=dict)  # added id -> (container, name)
    nesting: dict[str, str] = field(default_factory=dict)  # id -> container id, section languages only

    def to_json(self) -> dict:
        return {
            "edits": sorted(self.edits),
            "adds": sorted(self.adds),
            "deletes": sorted(self.deletes),
            "renames": [[old, new] for old, new in sorted(self.renames)],
            "signature_changes": sorted(self.signature_changes),
            "deleted_files": sorted(self.deleted_files),
            "added_files": sorted(self.added_files),
            "modified_files": sorted(self.modified_files),
            "import_only_files": sorted(self.import_only_files),
            "lines_added": int(self.lines_added),
            "lines_removed": int(self.lines_removed),
            "tests": {k: sorted(v) for k, v in sorted(self.tests.items())},
            "unparsed_files": sorted(self.unparsed_files),
            "unread_files": sorted(self.unread_files),
            "affected": list(self.affected),
            "affected_more": int(self.affected_more),
        }


def compute_facts(base: Mapping[str, TreeEntry], new: Mapping[str, TreeEntry],
                  load: Callable[[str], bytes], cache: SymbolCache | None = None,
                  base_key: str | None = None, paths: Iterable[str] | None = None,
                  affected: bool = True, opaque: frozenset[str] = frozenset()) -> Facts:
    """Facts of going from `base` to `new`; `load(oid)` gives a blob's bytes; a blob of
    `opaque` is never read: it is one whole file of no lines (opaque_file), as a binary file's
    lines are not counted, and none of its symbols is `affected`. `base_key` names
    the base tree (mentions.warm_base): when the cache holds its index, `affected` reads only
    the files that hold the names it looks for. `paths`, when the caller knows them, holds every
    path where the trees may differ: the rest are not compared (a scan of 100 000 paths cost
    10 ms a proposal). `affected=False` leaves `affected` empty and reads no file but the
    changed ones (a hook's write step, judged on leases alone)."""
    cache = cache if cache is not None else SymbolCache()
    index = cache.base_index(base_key) if base_key is not None else None
    return _Change(base, new, load, cache, index, opaque).run(paths, affected)


class _Side(NamedTuple):
    oid: str
    table: FileSymbols
    data: bytes | None      # None for a submodule: no content of its own


class _Change:
    def __init__(self, base: Mapping[str, TreeEntry], new: Mapping[str, TreeEntry],
                 load: Callable[[str], bytes], cache: SymbolCache,
                 index: NameIndex | None, opaque: frozenset[str] = frozenset()) -> None:
        self.base, self.new, self.load, self.cache = base, new, load, cache
        self.index, self.opaque = index, opaque
        self.facts = Facts()
        self.gone: dict[str, Symbol] = {}       # base symbols deleted or with a new signature

    def run(self, paths: Iterable[str] | None = None, affected: bool = True) -> Facts:
        base, new_tree = self.base, self.new
        if paths is not None:
            changed = [p for p in set(paths) if base.get(p) != new_tree.get(p)]
        else:   # most paths are the same entry on both sides: compare tuples before any mode word
            changed = [p for p, e in new_tree.items() if base.get(p) != e]
            changed += [p for p in base if p not in new_tree]
        for path in sorted(changed):
            old, new = base.get(path), new_tree.get(path)
            if old is not None and new is not None and old.oid == new.oid \
                    and mode_word(old.mode) == mode_word(new.mode):
                continue
            if old is None:
                self._added(path, new)
            elif new is None:
                self._deleted(path, old)
            else:
                self._modified(path, old, new)
        if affected:
            self._affected()
        return self.facts

    # --- reading ----------------------------------------------------------------------------

    def _side(self, path: str, entry: TreeEntry, with_data: bool,
              base: _Side | None = None) -> _Side:
        """`entry` at `path`: its table (spliced from `base`'s, the side it replaces, when it
        can be) and, `with_data`, its bytes."""
        mode = mode_word(entry.mode)
        if entry.oid in self.opaque:
            return _Side(entry.oid, opaque_file(path, language_of(path)), None)
        if base is not None and base.oid in self.opaque:
            base = None     # nothing to splice from
        if mode == "submodule":
            return _Side(entry.oid, whole_file(path, None, "unparsed", entry.oid.encode(), []), None)
        if mode == "symlink":   # its content is a path, whatever the extension says
            target = self.load(entry.oid)
            return _Side(entry.oid, whole_file(path, None, "unparsed", target, []), target)
        data: bytes | None = self.load(entry.oid) if with_data else None
        indexed = self.index.files.get(path) if self.index is not None and base is None else None
        if indexed is not None and indexed[0] == entry.oid:  # a base's table: its index holds it
            return _Side(entry.oid, indexed[1], data)
        if with_data:
            table = self.cache.table(path, entry.oid, lambda: data,
                                     None if base is None else base.oid,
                                     None if base is None else base.data,
                                     base_table=None if base is None else base.table)
        else:
            table = self.cache.table(path, entry.oid, lambda: self.load(entry.oid))
        return _Side(entry.oid, table, data)

    # --- files ------------------------------------------------------------------------------

    def _added(self, path: str, entry: TreeEntry) -> None:
        f = self.facts
        table = self._side(path, entry, False).table
        f.added_files.add(path)
        f.lines_added += table.line_count
        if table.status == "parsed":
            self._nest(table)
            for s in table.symbols:
                if s.kind != "def":
                    f.adds.add(s.id)
                    f.containers[s.id] = (s.container, s.name)
                    if s.test:
                        f.tests["added"].add(s.id)
                        if s.skipped:
                            f.tests["skipped"].add(s.id)
        else:
            f.adds.add(table.file_id)
            f.containers[table.file_id] = (table.file_id, table.symbols[0].name)
            if table.status == "unread":
                f.unread_files.add(path)
                f.syntax_errors.extend(table.syntax_errors)

    def _deleted(self, path: str, entry: TreeEntry) -> None:
        f = self.facts
        table = self._side(path, entry, False).table
        f.deleted_files.add(path)
        f.lines_removed += table.line_count
        self._nest(table)
        for s in table.symbols:
            if s.kind != "def":
                f.deletes.add(s.id)
                self.gone[s.id] = s
                if s.test:
                    f.tests["deleted"].add(s.id)

    def _modified(self, path: str, old_entry: TreeEntry, new_entry: TreeEntry) -> None:
        f = self.facts
        f.modified_files.add(path)
        old = self._side(path, old_entry, True)
        new = self._side(path, new_entry, True, old)
        binary = old.data is None or new.data is None or b"\0" in old.data or b"\0" in new.data
        old_lines = new_lines = []
        removed: list[int] = []
        added: list[int] = []
        if not binary:
            old_lines, new_lines = old.data.splitlines(), new.data.splitlines()
            removed, added = changed_rows(old_lines, new_lines)
            f.lines_removed += len(removed)
            f.lines_added += len(added)
        ot, nt = old.table, new.table
        if ot.status == "parsed" and nt.status == "parsed":
            if old_entry.oid == new_entry.oid:      # only the mode changed
                f.edits.add(nt.file_id)
                return
            self._nest(ot)
            self._nest(nt, ot)
            self._symbols(ot, nt, old.data, new.data)
            if (removed or added) and _within(removed, ot.import_rows, old_lines) \
                    and _within(added, nt.import_rows, new_lines):
                f.import_only_files.add(path)
            return
        f.edits.add(nt.file_id)
        f.syntax_errors.extend(nt.syntax_errors)
        if ot.status == "parsed" and nt.status == "unread":
            f.unread_files.add(path)
        if ot.language is None and nt.language is None and not binary \
                and mode_word(old_entry.mode) == mode_word(new_entry.mode) == "regular" \
                and 2 * (len(old_lines) - len(removed)) >= len(old_lines):
            f.unparsed_files.add(path)

    # --- symbols ----------------------------------------------------------------------------

    def _symbols(self, ot: FileSymbols, nt: FileSymbols, old_data: bytes,
                 new_data: bytes) -> None:
        f = self.facts
        added: list[Symbol] = []
        for s in nt.symbols:
            o = ot.by_id.get(s.id)
            if o is None:
                if s.kind != "def":
                    added.append(s)
                continue
            if s.def_hash is not None or o.def_hash is not None or s.kind == "impl":
                continue            # a type or impl: its <def> and members speak for it
            if o.body_hash == s.body_hash and o.signature_hash == s.signature_hash:
                if s.test and s.skipped and not o.skipped:
                    f.tests["skipped"].add(s.id)
                continue
            if s.kind == "section" and _appended(ot, o, old_data, nt, s, new_data):
                f.adds.add(f"{s.id}.{APPEND}")
                continue
            f.edits.add(s.id)
            if s.is_function and o.signature_hash != s.signature_hash:
                f.signature_changes.add(s.id)
                self.gone[o.id] = o
            if s.test:
                f.tests["modified"].add(s.id)
                if s.skipped and not o.skipped:
                    f.tests["skipped"].add(s.id)
        deleted = [o for o in ot.symbols if o.kind != "def" and o.id not in nt.by_id]
        renamed = _renames(deleted, added, old_data, new_data)
        for o in deleted:
            f.deletes.add(o.id)
            self.gone[o.id] = o
            if o.test:
                f.tests["deleted"].add(o.id)
        for s in added:
            f.adds.add(s.id)
            f.containers[s.id] = (s.container, s.name)
            if s.test:
                f.tests["added"].add(s.id)
                if s.skipped:
                    f.tests["skipped"].add(s.id)
        for o, s in renamed:
            f.renames.append((o.id, s.id))
            if _blanked(old_data[o.sig_start:o.sig_end], o.name) != \
                    _blanked(new_data[s.sig_start:s.sig_end], s.name):
                f.edits.add(s.id)

    def _nest(self, table: FileSymbols, base: FileSymbols | None = None) -> None:
        """The containers of a section language's symbols (`base`'s kept where both have an id)."""
        if table.language in SECTION_LANGUAGES:
            self.facts.nesting.update((s.id, s.container) for s in table.symbols
                                      if s.kind != "file" and (base is None or s.id not in base.by_id))

    # --- affected ---------------------------------------------------------------------------

    def _affected(self) -> None:
        f = self.facts
        names = {s.name for s in self.gone.values() if s.kind not in NOT_NAMES}
        if not names:
            return
        found = mentioned(names, self.base, self.cache, self.load, self.index)
        if self.opaque:     # what an opaque file mentions is read from its contents
            found = {s for s in found if (e := self.base.get(s.split("#", 1)[0])) is None or e.oid not in self.opaque}
        ordered = sorted(found - self.gone.keys())
        f.affected = ordered[:MAX_AFFECTED]
        f.affected_more = max(0, len(ordered) - MAX_AFFECTED)


def _within(rows: list[int], ranges: tuple[tuple[int, int], ...], lines: list[bytes]) -> bool:
    return all(not lines[r].strip() or any(a <= r <= b for a, b in ranges) for r in rows)


def _own(table: FileSymbols, sym: Symbol, data: bytes) -> bytes:
    children = [(s.start_byte, s.end_byte) for s in table.symbols
                if s.parent == sym.qualified and s.kind != "def"]
    return normalize(cut(data, sym.start_byte, sym.end_byte, children))


def _appended(ot: FileSymbols, o: Symbol, old_data: bytes, nt: FileSymbols, s: Symbol,
              new_data: bytes) -> bool:
    """The section's own text only grew at its end (Markdown)."""
    if nt.language != "markdown":
        return False
    before, after = _own(ot, o, old_data), _own(nt, s, new_data)
    return len(after) > len(before) and after.startswith(before)


def _blanked(text: bytes, name: str) -> bytes:
    return b" ".join(text.replace(name.encode(), b"\0").split())


def _renames(deleted: list[Symbol], added: list[Symbol], old_data: bytes,
             new_data: bytes) -> list[tuple[Symbol, Symbol]]:
    """Pairs (old, new) that go on under another name, parents first."""
    if not deleted or not added:
        return []
    moved: dict[str, str] = {}      # old qualified -> new qualified
    pairs: list[tuple[Symbol, Symbol]] = []
    for depth in sorted({o.qualified.count(".") for o in deleted}):
        level = [o for o in deleted
                 if o.qualified.count(".") == depth and o.kind not in ("file", "impl")]
        options: dict[str, list[Symbol]] = {}
        wanted_by: dict[str, int] = {}
        for o in level:
            parent = moved.get(o.parent, o.parent) if o.parent else None
            options[o.id] = [s for s in added if s.kind == o.kind and s.parent == parent
                             and _similar(o, old_data, s, new_data)]
            for s in options[o.id]:
                wanted_by[s.id] = wanted_by.get(s.id, 0) + 1
        for o in level:
            cands = options[o.id]
            if len(cands) == 1 and wanted_by[cands[0].id] == 1:
                pairs.append((o, cands[0]))
                moved[o.qualified] = cands[0].qualified
    return pairs


def _similar(o: Symbol, old_data: bytes, s: Symbol, new_data: bytes) -> bool:
    a = old_data[o.start_byte:o.end_byte].replace(o.name.encode(), b"\0").splitlines()
    b = new_data[s.start_byte:s.end_byte].replace(s.name.encode(), b"\0").splitlines()
    if a == b:
        return True
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.quick_ratio() >= RENAME_SIMILARITY and matcher.ratio() >= RENAME_SIMILARITY
