"""Sections as symbols for Markdown, TOML, JSON and YAML.

- Markdown: each heading's section, ATX (`## Install`) or setext (underlined with `===` for level
  1, `---` for level 2), nested by level (`README.md#Install.Linux`); a section ends at the next
  heading of its level or above. Its own text is the heading and what follows up to the first
  subsection. Text before the first heading is the file's own text. Headings inside block quotes
  and list items are text of their section.
- TOML: tables and array-of-tables elements (`[[bin]]` twice: `bin`, `bin~2`) with their keys
  (`Cargo.toml#dependencies.serde`); keys before the first table stand at the top.
- JSON and YAML: the keys of mappings, nested while the value is a mapping
  (`package.json#dependencies.react`); list items stay inside their key. Several YAML documents
  list their keys side by side.

A name may hold dots, so `Release.1.2` at the top and `Release` > `1` > `2` would spell one id:
the table numbers the later one (`Release.1.2~2`, symbols/table.py `UniqueIds`).
Adding to the end of a Markdown section is reported by the facts as `path#Section.<append>`.
"""
from __future__ import annotations

from typing import Iterator

from tree_sitter import Node, Point

from .languages import squash, text
from .outline import MAX_DEPTH, Raw

# Their hash covers their own text: a change in a subsection is not an edit of its parent.
SECTION_KINDS = frozenset({"section", "key"})


def section_outline(language: str, root: Node, data: bytes) -> list[Raw]:
    out: list[Raw] = []
    if language == "markdown":
        _markdown(root, data, out)
    elif language == "toml":
        _toml(root, data, out)
    elif language == "json":
        for child in root.named_children:
            if child.type == "object":
                _json_pairs(child, data, out, 0)
    else:
        _yaml(root, data, out, 0)
    return out


def _raw(node: Node, name: str, kind: str, head_end: int) -> Raw:
    return Raw(name=name, kind=kind, start=node.start_byte, head=node.start_byte,
               sig_end=head_end, end=node.end_byte, start_row=node.start_point.row,
               end_row=_last_row(node.start_point.row, node.end_point),
               def_row=node.start_point.row)


def _last_row(start_row: int, end: Point) -> int:
    """The last row with text: a span ending at column 0 ends on the row before."""
    row, col = end
    return row - 1 if col == 0 and row > start_row else row


def _text(node: Node | None, src: bytes) -> str:
    return "" if node is None else squash(text(node, src))


_HEADINGS = ("atx_heading", "setext_heading")
# tree-sitter-markdown nests ATX headings into `section` nodes but leaves every setext heading
# after the first inside the section before it: levels are read from the markers instead.
_LEVEL = {f"atx_h{n}_marker": n for n in range(1, 7)} | {
    "setext_h1_underline": 1, "setext_h2_underline": 2}


def _markdown(root: Node, src: bytes, out: list[Raw]) -> None:
    """Sections from the document's top-level headings in order, each holding the ones of a
    deeper level that follow it. Six levels at most: no recursion on the input's nesting."""
    open_: list[tuple[int, Raw]] = []
    for heading in _top_headings(root):
        # the marker comes first in an ATX heading, the underline last in a setext one
        if heading.type == "atx_heading":
            level = _LEVEL.get(heading.child(0).type, 1)
            content = heading.child_by_field_name("heading_content")
        else:
            level = _LEVEL.get(heading.child(heading.child_count - 1).type, 1)
            content = heading.child(0)
            content = content if content.type == "paragraph" else None
        while open_ and open_[-1][0] >= level:
            _close(open_.pop()[1], heading.start_byte, heading.start_point)
        raw = Raw(name=_text(content, src) or "(untitled)", kind="section",
                  start=heading.start_byte, head=heading.start_byte, sig_end=heading.end_byte,
                  end=heading.end_byte, start_row=heading.start_point.row,
                  end_row=heading.start_point.row, def_row=heading.start_point.row)
        (open_[-1][1].members if open_ else out).append(raw)
        open_.append((level, raw))
    for _, raw in open_:
        _close(raw, root.end_byte, root.end_point)


def _top_headings(root: Node) -> Iterator[Node]:
    """Headings that are blocks of the document itself (children of `section` nodes), in order."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _HEADINGS:
            yield node
        elif node.type in ("document", "section"):
            stack.extend(reversed(node.children))


def _close(raw: Raw, end: int, end_point: Point) -> None:
    """End a section where the next one starts."""
    raw.end = end
    raw.end_row = _last_row(raw.start_row, end_point)


def _toml_key(node: Node, src: bytes) -> str:
    """The key as written without its quotes; `""` for an empty one, as JSON and YAML show it
    (an empty name would make its keys look like the file's own)."""
    for child in node.named_children:
        if child.type in ("bare_key", "dotted_key", "quoted_key"):
            return _text(child, src).replace('"', "").replace("'", "") or '""'
    return '""'


def _toml(root: Node, src: bytes, out: list[Raw]) -> None:
    for node in root.named_children:
        if node.type == "pair":
            out.append(_raw(node, _toml_key(node, src), "key", node.end_byte))
        elif node.type in ("table", "table_array_element"):
            header_end = next((c.end_byte for c in node.children if c.type in ("]", "]]")),
                              node.start_byte)
            raw = _raw(node, _toml_key(node, src), "section", header_end)
            raw.members = [_raw(p, _toml_key(p, src), "key", p.end_byte)
                           for p in node.named_children if p.type == "pair"]
            out.append(raw)


def _json_pairs(obj: Node, src: bytes, out: list[Raw], depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    for pair in obj.named_children:
        if pair.type != "pair":
            continue
        key = pair.child_by_field_name("key")
        content = next((c for c in key.named_children if c.type == "string_content"), None) \
            if key is not None else None
        name = _text(content, src) if content is not None else _text(key, src).strip('"')
        value = pair.child_by_field_name("value")
        raw = _raw(pair, name or '""', "key", value.start_byte if value is not None else pair.end_byte)
        if value is not None and value.type == "object":
            _json_pairs(value, src, raw.members, depth + 1)
        out.append(raw)


def _yaml(node: Node, src: bytes, out: list[Raw], depth: int) -> None:
    """Descend through streams, documents and nodes to mappings; list each pair."""
    if depth > MAX_DEPTH:
        return
    for child in node.named_children:
        if child.type in ("block_mapping_pair", "flow_pair"):
            key = child.child_by_field_name("key")
            value = child.child_by_field_name("value")
            raw = _raw(child, _text(key, src) or '""', "key",
                       value.start_byte if value is not None else child.end_byte)
            if value is not None:
                _yaml(value, src, raw.members, depth + 1)
            out.append(raw)
        elif child.type in ("document", "block_node", "flow_node", "block_mapping",
                            "flow_mapping"):
            _yaml(child, src, out, depth + 1)
