"""Merging one file by symbols, where the line merge conflicted.

A file is an outline: its head (text before the first symbol), its symbols in order, each with
the text that leads to it from the previous one, and its tail. Symbols nest by position (a Go
method or a Rust `impl` method sits at the top of the file though its parent is the type), and a
container's text is an outline of its own. Symbols are matched by their name within their
container, after renames on each side are mapped back to the base name. Then, per symbol:

- changed on one side only (added, edited, deleted): that side's version;
- changed on both sides the same way: once;
- changed on both sides differently: a container present on all sides is merged member by
  member; otherwise the two versions of that symbol alone are line-merged, and if that
  conflicts the symbol is `conflict:<symbol>`. Delete against modify and two different
  additions of one name are conflicts;
- the text between symbols is line-merged; a conflict there belongs to the container's own
  text (`path#<file>`, `path#Type.<def>`). A hunk where both sides only added imports takes
  both sides' lines; one where either side removed a line stays a conflict (textmerge.py).

The caller checks that the result still parses, so a splice never yields a file its grammar
cannot read without saying so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from lonca.symbols import FileSymbols

from .textmerge import Clash, Segment, has_clash, lines, merge_lines

RENAME_SIMILARITY = 0.6
_NOT_UNITS = frozenset({"file", "def"})


@dataclass
class Unit:
    key: str                # name within its container, in base terms once renames are mapped
    qualified: str          # the side's own qualified name
    kind: str
    name: str
    lead: bytes             # text from the previous sibling (or the head) to this symbol
    text: bytes
    children: "Outline | None" = None


@dataclass
class Outline:
    qualified: str | None   # None: the file itself
    head: bytes
    units: dict[str, Unit]  # in file order
    tail: bytes


@dataclass
class FileMerge:
    segments: list[Segment]
    conflicts: list[str] = field(default_factory=list)


def outline(table: FileSymbols, data: bytes) -> Outline:
    syms = sorted((s for s in table.symbols if s.kind not in _NOT_UNITS),
                  key=lambda s: (s.start_byte, -s.end_byte))
    return _build(None, 0, len(data), syms, data)


def empty_outline() -> Outline:
    return Outline(None, b"", {}, b"")


def _build(qualified: str | None, start: int, end: int, syms: list, data: bytes) -> Outline:
    """The outline of data[start:end], given the symbols inside it sorted by position."""
    tops: list[tuple] = []
    i = 0
    while i < len(syms):
        s = syms[i]
        j = i + 1
        while j < len(syms) and syms[j].start_byte < s.end_byte:
            j += 1
        inner = [x for x in syms[i + 1:j] if (x.start_byte, x.end_byte) != (s.start_byte, s.end_byte)]
        tops.append((s, inner))
        i = j
    units: dict[str, Unit] = {}
    pos = start
    head = data[start:tops[0][0].start_byte] if tops else b""
    for n, (s, inner) in enumerate(tops):
        lead = b"" if n == 0 else data[pos:s.start_byte]
        key = s.qualified
        if qualified and key.startswith(qualified + "."):
            key = key[len(qualified) + 1:]
        children = _build(s.qualified, s.start_byte, s.end_byte, inner, data) if inner else None
        units[key] = Unit(key, s.qualified, s.kind, s.name, lead,
                          data[s.start_byte:s.end_byte], children)
        pos = s.end_byte
    tail = data[pos:end] if tops else data[start:end]
    return Outline(qualified, head, units, tail)


def _blank_name(u: Unit) -> bytes:
    return u.text.replace(u.name.encode(), b"")


def map_renames(base: Outline, side: Outline) -> Outline:
    """The side's outline with symbols it renamed keyed by their base name: a deleted and an
    added sibling of one kind whose texts, names blanked, are alike, each the other's only match."""
    gone = [u for k, u in base.units.items() if k not in side.units]
    new = [u for k, u in side.units.items() if k not in base.units]
    if not gone or not new:
        return side
    match: dict[str, list[str]] = {}
    back: dict[str, list[str]] = {}
    for g in gone:
        for a in new:
            if a.kind == g.kind and SequenceMatcher(
                    None, _blank_name(g), _blank_name(a), autojunk=False).ratio() >= RENAME_SIMILARITY:
                match.setdefault(g.key, []).append(a.key)
                back.setdefault(a.key, []).append(g.key)
    renamed = {olds[0]: new_key for new_key, olds in back.items()
               if len(olds) == 1 and match[olds[0]] == [new_key]}
    if not renamed:
        return side
    by_new = {v: k for k, v in renamed.items()}
    units = {}
    for k, u in side.units.items():
        if k in by_new:
            u = Unit(by_new[k], u.qualified, u.kind, u.name, u.lead, u.text, u.children)
        units[u.key] = u
    return Outline(side.qualified, side.head, units, side.tail)


class SymbolMerger:
    def __init__(self, path: str, own_ids: set[str], import_lines: set[bytes]) -> None:
        self.path = path
        self.own_ids = own_ids          # ids of the tables, to name a container's own text
        self.import_lines = import_lines
        self.conflicts: list[str] = []

    def merge(self, base: Outline, ours: Outline, theirs: Outline) -> FileMerge:
        segments = self._outline(base, ours, theirs)
        return FileMerge(segments, self.conflicts)

    def _is_import(self, line: bytes) -> bool:
        s = line.strip()
        return not s or s in self.import_lines

    def _own_id(self, qualified: str | None) -> str:
        if qualified is None:
            return f"{self.path}#<file>"
        own = f"{self.path}#{qualified}.<def>"
        return own if own in self.own_ids else f"{self.path}#{qualified}"

    def _conflict(self, symbol_id: str) -> None:
        if symbol_id not in self.conflicts:
            self.conflicts.append(symbol_id)

    def _text(self, base: bytes, ours: bytes, theirs: bytes, owner: str | None) -> list[Segment]:
        """Text between symbols: line-merged, a conflict belongs to the owner's own text."""
        segs = merge_lines(base, ours, theirs, self._is_import)
        if has_clash(segs):
            self._conflict(self._own_id(owner))
        return segs

    def _outline(self, base: Outline, ours: Outline, theirs: Outline) -> list[Segment]:
        ours, theirs = map_renames(base, ours), map_renames(base, theirs)
        owner = base.qualified or ours.qualified
        out: list[Segment] = list(self._text(base.head, ours.head, theirs.head, owner))
        first = True
        # the head leads to a side's first symbol, whose own lead is empty by construction:
        # it says nothing of what stands before that symbol elsewhere
        firsts = [next(iter(side.units), None) for side in (base, ours, theirs)]
        for key in _order(base, ours, theirs):
            b, o, t = base.units.get(key), ours.units.get(key), theirs.units.get(key)
            body = self._unit(b, o, t)
            if body is None:
                continue
            lb, lo, lt = (u.lead if u is not None and key != f else None for u, f in zip((b, o, t), firsts))
            out.extend([] if first else self._lead(lb, lo, lt, owner, ours, theirs))
            out.extend(body)
            first = False
        out.extend(self._text(base.tail, ours.tail, theirs.tail, owner))
        return out

    def _lead(self, lb: bytes | None, lo: bytes | None, lt: bytes | None, owner: str | None,
              ours: Outline, theirs: Outline) -> list[Segment]:
        """The text before a symbol that is not first now, from its leads (None: absent on
        that side, or first there); with none at all, a sibling's separator."""
        if lo is None:
            return [_sibling_lead(ours, theirs)] if lt is None else [lt]
        if lt is None:
            return [lo]
        lb = lo if lb is None else lb
        if lo == lt or lt == lb:
            return [lo]
        if lo == lb:
            return [lt]
        if not lo.strip() and not lt.strip():
            return [lo]     # spacing alone: trunk's
        return self._text(lb, lo, lt, owner)

    def _unit(self, b: Unit | None, o: Unit | None, t: Unit | None) -> list[Segment] | None:
        """The merged text of one symbol, or None when the merge deletes it."""
        tb, to, tt = (u.text if u else None for u in (b, o, t))
        if to == tb:
            return None if tt is None else [tt]
        if tt == tb or to == tt:
            return None if to is None else [to]
        named = b or o or t
        symbol_id = f"{self.path}#{named.qualified}"
        if b is None or o is None or t is None:
            # two additions of one name, or a deletion against an edit
            self._conflict(symbol_id)
            return [Clash(to or b"", tt or b"")]
        renamed = _apply_rename(b, o, t) or _apply_rename(b, t, o)
        if renamed is not None:
            return [renamed]
        if b.children and o.children and t.children:
            return self._outline(b.children, o.children, t.children)
        segs = merge_lines(tb, to, tt)
        if has_clash(segs):
            self._conflict(symbol_id)
        return segs


def _sibling_lead(*outlines: Outline) -> bytes:
    for side in outlines:
        for u in side.units.values():
            if u.lead:
                return u.lead
    return b"\n"


def _renamed(text: bytes, old: str, new: str) -> bytes | None:
    """`text` with the first whole-word `old` (the name in the signature) made `new`."""
    found = re.search(rb"(?<![\w$])" + re.escape(old.encode()) + rb"(?![\w$])", text)
    if found is None:
        return None
    return text[:found.start()] + new.encode() + text[found.end():]


def _apply_rename(b: Unit, renamer: Unit, editor: Unit) -> bytes | None:
    """When one side only renamed the symbol, the other side's version under the new name."""
    if renamer.name == b.name or editor.name != b.name:
        return None
    if _renamed(b.text, b.name, renamer.name) != renamer.text:
        return None
    return _renamed(editor.text, b.name, renamer.name)


def _order(base: Outline, ours: Outline, theirs: Outline) -> list[str]:
    """Trunk's order; what trunk lacks (the change's additions, and what trunk deleted but the
    change edited) goes after its predecessor in the change."""
    out = list(ours.units)
    placed = set(out)
    tkeys = list(theirs.units)
    for i, key in enumerate(tkeys):
        if key in placed:
            continue
        pos = 0
        for prev in reversed(tkeys[:i]):
            if prev in placed:
                pos = out.index(prev) + 1
                break
        # after trunk's own additions at the same place: trunk landed first
        while pos < len(out) and out[pos] not in base.units and out[pos] not in theirs.units:
            pos += 1
        out.insert(pos, key)
        placed.add(key)
    return out


def import_lines(tables: list[FileSymbols], texts: list[bytes]) -> set[bytes]:
    """The stripped lines that lie inside import statements in any of the versions."""
    found: set[bytes] = set()
    for table, data in zip(tables, texts):
        rows = lines(data)
        for lo, hi in table.import_rows:
            found.update(r.strip() for r in rows[lo:hi + 1])
    found.discard(b"")
    return found
