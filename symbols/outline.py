"""Syntax tree -> outline: the definitions of a file as nested `Raw` entries, before names are
made unique and hashes taken (symbols/table.py).

Only the statements of a file, of types and of transparent blocks are visited, never function
bodies, so the cost stays a small fraction of the parse. Nesting is bounded by MAX_DEPTH.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tree_sitter import Node

from .languages import INHERENT, KIND_OF, Lang

MAX_DEPTH = 64
COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
FUNCTION_KINDS = frozenset({"function", "method", "constructor", "destructor"})


@dataclass(eq=False)
class Raw:
    name: str
    kind: str
    start: int              # first byte, leading comments included
    head: int               # first byte of the signature (decorators, attributes included)
    sig_end: int            # the signature is [head, sig_end); the body follows
    end: int
    start_row: int
    end_row: int
    def_row: int            # row of the definition itself (after decorators and comments)
    key: str | None = None
    owner: str | None = None            # the type it belongs to, declared outside it
    container: bool = False             # members are symbols, the rest is its <def>
    members: list["Raw"] = field(default_factory=list)
    extra_own: list[tuple[int, int]] = field(default_factory=list)
    own_in_parent: bool = False         # its own text belongs to the parent's <def>
    test: bool = False
    skipped: bool = False


class Outline(NamedTuple):
    raws: list[Raw]                     # top-level entries
    imports: list[tuple[int, int]]      # row ranges of import statements
    # (start, end, first, last) of each block read through (`namespace X {}`, Python `if`)
    # with symbols inside: its bytes, and where its first symbol starts and its last ends
    wraps: list[tuple[int, int, int, int]]


def outline(root: Node, lang: Lang, data: bytes) -> Outline:
    found = Outline([], [], [])
    _walk(root.children, lang, data, False, 0, found.raws, found.imports, found.wraps)
    return found._replace(raws=_attach(found.raws))


def _walk(nodes: list[Node], lang: Lang, data: bytes, in_type: bool, depth: int,
          out: list[Raw], imports: list[tuple[int, int]] | None,
          wraps: list[tuple[int, int, int, int]]) -> None:
    if depth > MAX_DEPTH:
        return
    pending: Node | None = None      # first of the comments/attributes before the next node
    pending_head: Node | None = None  # first attribute (not comment) among them
    last_row = -2
    for node in nodes:
        t = node.type
        row = node.start_point.row
        if t in COMMENTS or t in lang.leading:
            if pending is None or row > last_row + 1:
                pending, pending_head = node, None
            if pending_head is None and t not in COMMENTS:
                pending_head = node
            last_row = node.end_point.row
            continue
        if pending is not None and row > last_row + 1:
            pending = pending_head = None
        first, head = pending, pending_head
        pending = pending_head = None
        if imports is not None and t in lang.imports:
            imports.append((node.start_point.row, node.end_point.row))
            continue
        inner = node
        while inner is not None and inner.type in lang.wrappers:
            inner = lang.wrappers[inner.type](inner)
        if inner is None:
            continue
        if inner.type in lang.rules:
            raw = _make(inner, node, first, head, lang, data, in_type, depth, wraps)
            if raw is not None:
                out.append(raw)
        elif inner.type in lang.transparent:
            found: list[Raw] = []
            _walk(inner.children, lang, data, in_type, depth + 1, found, imports, wraps)
            # `type X struct{}` alone in its declaration: the keyword belongs to the symbol
            if len(found) == 1 and len(inner.named_children) == 1 and inner is node:
                found[0].start = min(found[0].start, node.start_byte)
                found[0].head = min(found[0].head, node.start_byte)
            if found:
                first, last = min(r.start for r in found), max(r.end for r in found)
                if (first, last) != (node.start_byte, node.end_byte):
                    wraps.append((node.start_byte, node.end_byte, first, last))
            out.extend(found)


def _make(node: Node, outer: Node, first: Node | None, head: Node | None, lang: Lang,
          data: bytes, in_type: bool, depth: int,
          wraps: list[tuple[int, int, int, int]]) -> Raw | None:
    rule = lang.rules[node.type]
    name = rule.name(node, data)
    if not name:
        return None
    body = rule.body(node)
    if rule.needs_body and body is None:
        return None
    kind_of = KIND_OF.get((lang.name, node.type))
    kind = kind_of(node, data) if kind_of is not None else rule.kind
    if kind == "fn":
        kind = "method" if in_type else "function"
    start = first.start_byte if first is not None else outer.start_byte
    head_byte = head.start_byte if head is not None else outer.start_byte
    end = outer.end_byte
    sig_end = end if body is None else _signature_end(node, body)
    raw = Raw(name=name, kind=kind, start=start, head=head_byte, sig_end=sig_end, end=end,
              start_row=(first or outer).start_point.row, end_row=outer.end_point.row,
              def_row=node.start_point.row, container=rule.container,
              key=rule.key(node, data) if rule.key is not None else None,
              owner=rule.owner(node, data) if rule.owner is not None else None)
    if kind in FUNCTION_KINDS:
        _mark_test(raw, lang, data, body)
    if rule.container and body is not None:
        _walk(body.children, lang, data, kind != "module", depth + 1, raw.members, None, wraps)
        raw.members = _attach(raw.members)
    return raw


def _signature_end(node: Node, body: Node) -> int:
    """Where the text before the body ends, comments between the two left out (Python puts a
    comment above a block's first statement before the block)."""
    end = node.start_byte
    for child in node.children:
        if child.start_byte >= body.start_byte:
            break
        if child.type not in COMMENTS:
            end = child.end_byte
    return end if body.parent == node else body.start_byte


def _mark_test(raw: Raw, lang: Lang, data: bytes, body: Node | None) -> None:
    signature = data[raw.head:raw.sig_end].decode("utf-8", "replace")
    raw.test = bool((lang.test_name is not None and lang.test_name.search(raw.name))
                    or (lang.test_mark is not None and lang.test_mark.search(signature)))
    if not raw.test:
        return
    raw.skipped = bool(
        (lang.skip_mark is not None and lang.skip_mark.search(signature))
        or (lang.skip_body is not None and body is not None
            and lang.skip_body.search(data, body.start_byte, body.end_byte)))


def _attach(raws: list[Raw]) -> list[Raw]:
    """Put what is declared outside its type (Go methods, `C::m`, Rust impls) under the type
    when the type is in the same scope. A Rust inherent impl of a type defined elsewhere stands
    for that type; its other impls join it."""
    if not any(r.owner for r in raws):
        return raws
    types: dict[str, Raw] = {}
    for r in raws:
        if r.container and r.owner is None and r.kind not in ("module", "impl"):
            types.setdefault(r.name, r)
    kept: list[Raw] = []
    for r in raws:
        if r.owner and r.kind == "impl" and r.name == INHERENT:
            target = types.get(r.owner)
            if target is None:
                r.name, r.owner = r.owner, None
                types[r.name] = r
                kept.append(r)
            else:
                target.members.extend(r.members)
                target.extra_own.extend(own_ranges(r.start, r.end, spans_of(r.members)))
        else:
            kept.append(r)
    result: list[Raw] = []
    for r in kept:
        target = types.get(r.owner) if r.owner else None
        if target is None or target is r:
            result.append(r)
            continue
        target.members.append(r)
        r.owner = None
        if r.kind == "function":        # C++ `int C::m() {}`
            r.kind = "method"
        if r.kind == "impl":
            target.extra_own.extend(own_ranges(r.start, r.end, spans_of(r.members)))
            r.own_in_parent = True
    for t in types.values():
        t.members.sort(key=lambda m: m.start)
    return result


def spans_of(raws: list[Raw]) -> list[tuple[int, int]]:
    return [(r.start, r.end) for r in raws]


def own_ranges(start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) without the spans (of members) that lie inside it."""
    out, pos = [], start
    for m_start, m_end in sorted(spans):
        if m_end <= start or m_start >= end:
            continue
        if m_start > pos:
            out.append((pos, m_start))
        pos = max(pos, m_end)
    if pos < end:
        out.append((pos, end))
    return out
