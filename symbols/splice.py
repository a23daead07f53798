"""The table of an edited blob from the table of the blob it replaces, parsing only around the
edit: a change to one method of a 3 000-line file reads that method and its neighbours.

tree-sitter reads only the included ranges of a document, as if they followed each other, with
the document's own offsets and rows. The ranges are the headers and tails of the types that hold
the edit and the run of their members the edit touches, with the unchanged neighbour on each
side (of a big type, its head, tail and nearest member): text the edit adds next to a neighbour
(an indented line after a Python method) would change the neighbour, and the splice gives up.

The result must be the table a whole parse gives (tests/symbols/test_symbols_splice.py holds
it to that), so anything the splice cannot vouch for goes back to a whole parse (None):
- a file whose symbols are not nested by their text (Go methods and Rust impls joined to their
  type, `C::m` outside C), section languages, a blob the grammar cannot read;
- the old text, parsed the same way, not giving back the old table's symbols of those ranges
  (a grammar that needs more context, like PHP's `<?php`);
- an error in either parse, or a holder or neighbour of the run not starting and ending where
  it did;
- a name of the run also among the members left out (`~N` and overload keys count siblings).

`names` of a spliced table is the old names and those of the parsed ranges: a superset of the
file's identifiers, which is all the facts ask of it (they look for whole words afterwards).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from tree_sitter import Range

from .languages import LANGS, SECTION_LANGUAGES
from .outline import outline
from .parsing import edit_span, parse_bounded, point, text_problem
from .table import (FileSymbols, Symbol, body_digest, count_lines, emit, file_symbol,
                    identifiers, own_digest)

_NOT_SPANS = ("def", "file")


def spliced_table(path: str, old: FileSymbols, old_data: bytes,
                  new_data: bytes) -> FileSymbols | None:
    """The table of `new_data` at `path`, or None when only a whole parse can tell."""
    if old.status != "parsed" or old.language in SECTION_LANGUAGES or old.path != path \
            or text_problem(new_data, old.language) is not None:
        return None
    nest = _Nest.of(old)
    if nest is None:
        return None
    return _Splice(path, old, nest, old_data, new_data).run()


class _Nest:
    """The old table's symbols as a tree by text: who holds whom."""

    def __init__(self, top: list[Symbol], children: dict[str, list[Symbol]]) -> None:
        self.top, self.children = top, children

    @classmethod
    def of(cls, table: FileSymbols) -> "_Nest | None":
        by_name = {s.qualified: s for s in table.symbols if s.kind not in _NOT_SPANS}
        top: list[Symbol] = []
        children: dict[str, list[Symbol]] = {}
        for s in by_name.values():
            if s.kind == "impl":
                return None
            if s.parent is None:
                top.append(s)
                continue
            holder = by_name.get(s.parent)
            if holder is None or s.start_byte < holder.start_byte or s.end_byte > holder.end_byte:
                return None
            children.setdefault(s.parent, []).append(s)
        return cls(top, children)


class _Splice:
    def __init__(self, path: str, old: FileSymbols, nest: _Nest, old_data: bytes,
                 new_data: bytes) -> None:
        self.path, self.old, self.nest = path, old, nest
        self.old_data, self.new_data = old_data, new_data
        self.start, old_end, new_end = edit_span(old_data, new_data)
        self.old_end, self.delta = old_end, new_end - old_end
        self.line_delta = (new_data.count(b"\n", self.start, new_end)
                           - old_data.count(b"\n", self.start, old_end))

    def run(self) -> FileSymbols | None:
        chain, members = self._holders()
        lo, hi = self._run(members)
        prev = members[lo - 1] if lo > 0 else None
        after_run = members[hi + 1] if hi + 1 < len(members) else None
        # the run: from the end of the member before to the start of the member after
        if chain:
            r0 = prev.end_byte if prev else members[lo].start_byte
            r1 = after_run.start_byte if after_run else members[hi].end_byte
        elif prev is None and after_run is None:
            return None     # the whole file: nothing to gain
        else:
            r0 = prev.end_byte if prev else 0
            r1 = after_run.start_byte if after_run else len(self.old_data)
        wraps = _Wraps(self.old.wraps, r0, r1)
        if wraps.crossing:
            return None
        kids = self.nest.children
        ranges = _merged([(h.start_byte, kids[h.qualified][0].start_byte) for h in chain]
                         + self._wrap_ends(wraps.holding)
                         + self._neighbour(prev, last=True) + [(r0, r1)]
                         + self._neighbour(after_run, last=False)
                         + [(kids[h.qualified][-1].end_byte, h.end_byte) for h in chain],
                         self._after_newline)
        old_read = self._read(self.old_data, ranges, 0)
        new_read = self._read(self.new_data, ranges, self.delta)
        if old_read is None or new_read is None:
            return None
        r1_new = r1 + self.delta
        parent = chain[-1].qualified if chain else None
        old_run = [s for s in old_read.symbols if r0 <= s.start_byte and s.end_byte <= r1]
        new_run = [s for s in new_read.symbols if r0 <= s.start_byte and s.end_byte <= r1_new]
        new_top = [s for s in new_run if s.parent == parent and s.kind != "def"]
        outside = {m.name for m in members[:lo] + members[hi + 1:]}
        if not all(self._in_place(old_read, new_read, s)
                   for s in chain + [prev, after_run] if s is not None) \
                or any(s.name in outside for s in new_top) \
                or any(s.name in outside for s in old_run if s.parent == parent):
            return None
        before, kept_run, after = self._parts(r0, r1)
        if kept_run != old_run or wraps.inside != _within(old_read.wraps, r0, r1):
            return None     # the ranges alone do not read as the whole file did
        new_wraps = wraps.spliced(new_read.wraps, r0, r1_new, self.delta)
        imports = self._imports(r0, r1, old_read.imports, new_read.imports)
        at_end = not chain and after_run is None
        old_end_line = self.old.symbols[-1].end_line       # the last symbol is <file>
        if new_wraps is None or imports is None \
                or (at_end and old_read.end_row + 1 != old_end_line):
            return None
        end_row = new_read.end_row if at_end else old_end_line - 1 + self.line_delta
        symbols = self._held(before, chain, new_top, after) + new_run + after
        top = [s for s in symbols if s.parent is None and s.kind not in _NOT_SPANS]
        symbols.append(file_symbol(self.path, self.new_data, end_row,
                                   [(s.start_byte, s.end_byte) for s in top]))
        names = self.old.names | identifiers(self.new_data[r0:r1_new])
        return FileSymbols(self.path, self.old.language, "parsed", symbols, [], names,
                           tuple(imports), count_lines(self.new_data), tuple(new_wraps))

    # --- where ----------------------------------------------------------------------------

    def _holders(self) -> tuple[list[Symbol], list[Symbol]]:
        """The types that hold the whole edit within their members, outermost first, and the
        members of the innermost (or the file's top level)."""
        chain: list[Symbol] = []
        members = self.nest.top
        while True:
            touched = [m for m in members if self._touches(m)]
            if len(touched) != 1:
                return chain, members
            kids = self.nest.children.get(touched[0].qualified)
            if not kids or not (kids[0].start_byte <= self.start
                                and self.old_end <= kids[-1].end_byte):
                return chain, members
            chain.append(touched[0])
            members = kids

    def _touches(self, s: Symbol) -> bool:
        return s.start_byte <= self.old_end and s.end_byte >= self.start

    def _run(self, members: list[Symbol]) -> tuple[int, int]:
        """Indices of the first and last members the edit touches; between two members it
        touches none: (next, previous)."""
        touched = [i for i, m in enumerate(members) if self._touches(m)]
        if touched:
            return touched[0], touched[-1]
        lo = sum(1 for m in members if m.end_byte < self.start)
        return lo, lo - 1

    # --- reading the ranges -----------------------------------------------------------------

    def _read(self, data: bytes, ranges: list[tuple[int, int]], delta: int) -> _Read | None:
        """`data` read only in `ranges` (old offsets; those from the edit on move by
        `delta`), or None when the grammar finds an error there."""
        # a range starting where the edit starts, or ending where it ends, takes in its text
        moved = [(a if a <= self.start else a + delta, b if b < self.old_end else b + delta)
                 for a, b in ranges]
        included = [Range(point(data, a), point(data, b), a, b) for a, b in moved if b > a]
        tree = parse_bounded(self.old.language, data, ranges=included)
        if tree is None or tree.root_node.has_error:
            return None
        found = outline(tree.root_node, LANGS[self.old.language], data)
        symbols: list[Symbol] = []
        emit(found.raws, None, self.path, data, symbols)
        return _Read(symbols, found.imports, found.wraps, tree.root_node.end_point.row)

    def _after_newline(self, at: int) -> int:
        """A range that starts at a symbol on its own line starts at the line break before
        it: ranges read one after the other keep their symbols on lines of their own."""
        brk = self.old_data.rfind(b"\n", 0, at)
        if at <= self.start or brk >= self.old_end:     # not across the edit
            if not self.old_data[brk + 1:at].strip():
                return max(brk, 0)
        return at

    def _wrap_ends(self, holding: list[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
        """What is read of each block that holds the run: its text up to the end of its first
        symbol and from the start of its last (a Python `if` branch left empty would not
        parse: `if X:` then `else:`)."""
        if not holding:
            return []
        spans = [(s.start_byte, s.end_byte) for s in self.old.symbols if s.kind not in _NOT_SPANS]
        end_of = {a: b for a, b in sorted(spans, key=lambda ab: ab[1])}      # outermost wins
        start_of = {b: a for a, b in sorted(spans, reverse=True)}
        out = []
        for start, end, first, last in holding:
            out += [(start, end_of.get(first, end)), (start_of.get(last, start), end)]
        return out

    def _neighbour(self, s: Symbol | None, last: bool) -> list[tuple[int, int]]:
        """What is read of the unchanged member before the run (`last`) or after it: the
        whole of it, or of a type its head and tail with its nearest member only."""
        if s is None:
            return []
        kids = self.nest.children.get(s.qualified)
        if not kids:
            return [(s.start_byte, s.end_byte)]
        if last:
            return [(s.start_byte, kids[0].start_byte), (kids[-1].start_byte, s.end_byte)]
        return [(s.start_byte, kids[0].end_byte), (kids[-1].end_byte, s.end_byte)]

    def _in_place(self, old_read: _Read, new_read: _Read, s: Symbol) -> bool:
        """`s`, a holder or a neighbour of the run, read from the old text where it starts,
        and from the new text where it was read from the old, what lies past the edit moved
        by it: the edit neither ended it early (a line dedented in Python) nor ran into it.
        Nothing else of it is compared: only part of it may have been read."""
        def found(read: _Read) -> Symbol | None:
            return next((got for got in read.symbols
                         if got.qualified == s.qualified and got.kind == s.kind), None)

        def moved(x: int) -> int:
            return x + self.delta if x >= self.old_end else x
        o, n = found(old_read), found(new_read)
        return o is not None and n is not None and o.start_byte == s.start_byte \
            and (n.start_byte, n.end_byte) == (moved(o.start_byte), moved(o.end_byte))

    # --- putting it together ----------------------------------------------------------------

    def _parts(self, r0: int, r1: int) -> tuple[list[Symbol], list[Symbol], list[Symbol]]:
        """The old symbols before the run (the holders among them), in it, and after it moved
        by the edit; in table order, which is text order, holders before what they hold."""
        before, run, after = [], [], []
        for s in self.old.symbols[:-1]:        # the last is <file>
            if r0 <= s.start_byte and s.end_byte <= r1:
                run.append(s)
            elif s.start_byte >= r1:
                after.append(self._moved(s))
            else:
                before.append(s)
        return before, run, after

    def _moved(self, s: Symbol) -> Symbol:
        d, dl = self.delta, self.line_delta
        return Symbol(s.id, s.name, s.qualified, s.kind, s.parent, s.start_byte + d,
                      s.end_byte + d, s.start_line + dl, s.end_line + dl, s.signature_hash,
                      s.body_hash, s.def_hash, s.def_line + dl, s.sig_start + d, s.sig_end + d,
                      s.test, s.skipped)

    def _held(self, before: list[Symbol], chain: list[Symbol], new_top: list[Symbol],
              after: list[Symbol]) -> list[Symbol]:
        """`before` with the holders (and their <def>) redone over the new text."""
        holders = {s.qualified for s in chain}
        spans: dict[str | None, list[tuple[int, int]]] = {}
        for s in before + new_top + after:
            if s.kind not in _NOT_SPANS:
                end = s.end_byte + (self.delta if s.qualified in holders else 0)
                spans.setdefault(s.parent, []).append((s.start_byte, end))
        out: list[Symbol] = []
        for s in before:
            qualified = s.parent if s.kind == "def" else s.qualified
            if qualified not in holders:
                out.append(s)
                continue
            end = s.end_byte + self.delta
            own = None
            if s.def_hash is not None or s.kind == "def":
                own = own_digest(self.new_data, s.start_byte, end, spans.get(qualified, []))
            if s.kind == "def":     # its body is its type's own text
                body, own = own, None
            else:
                body = body_digest(self.new_data, s.start_byte, s.sig_start, s.sig_end, end)
            out.append(Symbol(s.id, s.name, s.qualified, s.kind, s.parent, s.start_byte, end,
                              s.start_line, s.end_line + self.line_delta, s.signature_hash,
                              body, own, s.def_line, s.sig_start, s.sig_end, s.test, s.skipped))
        return out

    def _imports(self, r0: int, r1: int, old_read: list[tuple[int, int]],
                 new_read: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
        """Import rows: those before the run, those read in it, those after it moved; None
        when the old text read alone does not give the run's old ones."""
        first = self.old_data.count(b"\n", 0, r0)
        last = self.old_data.count(b"\n", 0, r1)
        before = [r for r in self.old.import_rows if r[1] < first]
        after = [(a + self.line_delta, b + self.line_delta)
                 for a, b in self.old.import_rows if a > last]
        inside = [r for r in self.old.import_rows if first <= r[1] and r[0] <= last]
        if inside != [r for r in old_read if first <= r[1] and r[0] <= last]:
            return None
        last += self.line_delta
        return before + [r for r in new_read if first <= r[1] and r[0] <= last] + after


class _Read(NamedTuple):
    symbols: list[Symbol]
    imports: list[tuple[int, int]]
    wraps: list[tuple[int, int, int, int]]
    end_row: int


class _Wraps:
    """The old table's wraps (outline.Outline.wraps) against the run [r0, r1): those that hold
    it, whose heads and tails are read with it, those inside it, and whether one crosses it."""

    def __init__(self, wraps: tuple[tuple[int, int, int, int], ...], r0: int, r1: int) -> None:
        # one that ends where the run starts could take in what the edit adds: not "before"
        self.before = [w for w in wraps if w[1] < r0]
        self.after = [w for w in wraps if w[0] > r1]
        self.inside = _within(wraps, r0, r1)
        self.holding = [w for w in wraps if w[0] <= r0 and r1 <= w[1]
                        and not (r0 <= w[0] and w[1] <= r1)]
        self.crossing = len(self.before) + len(self.after) + len(self.inside) \
            + len(self.holding) != len(wraps)

    def spliced(self, read: list[tuple[int, int, int, int]], r0: int, r1_new: int,
                delta: int) -> list[tuple[int, int, int, int]] | None:
        """The new file's wraps from `read`, those of the new text read in the ranges; None
        when a holding wrap does not read as it should."""
        by_start = {w[0]: w for w in read}
        holding = []
        for start, end, first, last in self.holding:
            got = by_start.get(start)
            if got is None or got[1] != end + delta:
                return None
            holding.append((start, end + delta, first if first < r0 else got[2],
                            last + delta if last + delta > r1_new else got[3]))
        moved = [(a + delta, b + delta, f + delta, t + delta) for a, b, f, t in self.after]
        return sorted(self.before + holding + _within(read, r0, r1_new) + moved)


def _within(wraps, r0: int, r1: int) -> list[tuple[int, int, int, int]]:
    return sorted(w for w in wraps if r0 <= w[0] and w[1] <= r1)


def _merged(ranges: list[tuple[int, int]],
            start: Callable[[int], int]) -> list[tuple[int, int]]:
    """`ranges` sorted and joined where they meet, each starting at `start(its start)`."""
    out: list[tuple[int, int]] = []
    for a, b in sorted((start(a), b) for a, b in ranges if b > a):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out
