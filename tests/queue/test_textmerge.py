"""The three-way text merge against git's own (`git merge-file`, run here): the same hunks
resolve, to the same text, and the same ones conflict."""
from __future__ import annotations

import random

from lonca.queue.textmerge import clean_bytes, has_clash, lines, merge_lines

from merge_invariant import git_merge_file


def _ours(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    segs = merge_lines(base, ours, theirs)
    return None if has_clash(segs) else clean_bytes(segs)


def test_move_against_delete_conflicts_as_in_git():
    # trunk moved L1 above L0, the change deleted L1: aligned as difflib pairs it, the moved
    # line came back; git conflicts
    base, ours, theirs = b"L0\nL1\n", b"L1\nL0\n", b"L0\n"
    assert git_merge_file(base, ours, theirs) is None
    assert has_clash(merge_lines(base, ours, theirs))


def test_lines_end_at_newlines_only():
    assert lines(b"a\rb\r\nc") == [b"a\rb\r\n", b"c"]
    assert b"".join(lines(b"x\n\ny")) == b"x\n\ny" and lines(b"") == []


def _mutate(rnd: random.Random, text: list[bytes]) -> list[bytes]:
    out = list(text)
    for _ in range(rnd.randint(1, 2)):
        if not out:
            break
        i = rnd.randrange(len(out))
        op = rnd.choice(["delete", "move", "insert", "edit", "crlf"])
        if op == "delete":
            del out[i]
        elif op == "move":
            out.insert(rnd.randrange(len(out)), out.pop(i))
        elif op == "insert":
            out.insert(i, b"new%d\n" % rnd.randint(0, 99))
        elif op == "edit":
            out[i] = out[i].rstrip(b"\n") + b"'\n"
        else:
            out[i] = out[i].replace(b"\n", b"\r\n")
    return out


def test_agrees_with_git_merge_file():
    rnd = random.Random(11)
    for _ in range(300):
        base = [(b"L%d\rx\n" if i % 4 == 0 else b"L%d\n") % i for i in range(rnd.randint(2, 9))]
        b, o, t = (b"".join(x) for x in (base, _mutate(rnd, base), _mutate(rnd, base)))
        assert _ours(b, o, t) == git_merge_file(b, o, t), (b, o, t)
