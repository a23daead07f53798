"""A parse keeps no reference to what it read (symbols/parsing.py, _give_back): py-tree-sitter
0.26.1 kept the chunks its read callback returned (each of an incremental parse, the first of a
cold one: the whole text), part of what the soak's worker grew by once its caches were full."""
import gc
import sys

import pytest

from lonca.symbols.parsing import parse_bounded

SOURCE = (b'"""Soak file 3 of agent 1."""\n\n\ndef a1_f3(x):\n    return x + 3\n\n\n'
          b"def a1_g3(x, y):\n    return x * y + 7\n")


def edited(tree, at: int, old_end: int, new_end: int):
    tree.edit(start_byte=at, old_end_byte=old_end, new_end_byte=new_end,
              start_point=(0, at), old_end_point=(0, old_end), new_end_point=(0, new_end))
    return tree


def test_incremental_parses_leave_no_block_behind():
    old = parse_bounded("python", SOURCE)
    for _ in range(100):
        parse_bounded("python", SOURCE, old=old)
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(3000):
        parse_bounded("python", SOURCE, old=old)
    gc.collect()
    assert (sys.getallocatedblocks() - before) / 3000 < 0.05   # 1.0 a parse without _give_back


@pytest.mark.parametrize("at", [0, 40, len(SOURCE) - 2])
def test_an_edit_anywhere_parses_as_a_cold_parse_and_keeps_no_reference_to_the_text(at):
    new = SOURCE[:at] + b"#" + SOURCE[at:] if at else b"x = 1\n" + SOURCE
    grown = len(new) - len(SOURCE)
    old = edited(parse_bounded("python", SOURCE), at, at, at + grown)
    refs = sys.getrefcount(new)
    tree, cold = parse_bounded("python", new, old=old), parse_bounded("python", new)
    assert str(tree.root_node) == str(cold.root_node)
    del tree, cold
    assert sys.getrefcount(new) == refs     # 2 more without _give_back (the text itself)


@pytest.mark.parametrize("text", [b"x", b"x\n", b"x=1"])
def test_tiny_texts_parse_whole_incrementally(text):
    old = parse_bounded("python", text)
    assert str(parse_bounded("python", text, old=old).root_node) == str(old.root_node)
    assert parse_bounded("python", text, old=old).root_node.end_byte == len(text)
