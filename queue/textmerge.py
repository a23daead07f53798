"""A three-way line merge (diff3) in Python, for the pieces the symbol merge hands it.

libgit2 has already line-merged the whole file when this runs; this merges parts of it (one
symbol, the text between symbols) and keeps each conflict as a `Clash` so that `sync` can write
it with its own markers. A conflicting hunk in which both sides only added lines, every one an
import (or blank), is settled by taking both sides' additions: imports added on both sides at one
place are the commonest false conflict. A hunk where either side removed a line is a conflict
even among imports: a removed line beside added ones may be a rewrite (a switched dependency),
and a rewrite against a removal is delete against modify.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import pygit2
from pygit2.enums import DiffOption


@dataclass(frozen=True)
class Clash:
    """Both sides of one conflict: `trunk` is ours (trunk), `local` is theirs (the change)."""
    trunk: bytes
    local: bytes


Segment = Union[bytes, Clash]


def lines(data: bytes) -> list[bytes]:
    """Lines as git and tree-sitter count them: ended by `\n` only (a lone `\r` is text)."""
    parts = data.split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _kept(old: list[bytes], new: list[bytes]) -> list[tuple[int, int, int]]:
    """(old_lo, new_lo, n) runs of lines that git's own diff (libgit2's xdiff) keeps, ending
    with (len old, len new, 0). git's alignment, not difflib's: where a line moved, the two
    can pair different copies, and a merge that pairs them otherwise than git resolves
    move-against-delete cleanly by bringing the deleted line back."""
    patch = pygit2.Patch.create_from(b"".join(old), b"".join(new), context_lines=0,
                                     interhunk_lines=0, flag=DiffOption.FORCE_TEXT)
    out, i, j = [], 0, 0
    for h in patch.hunks:
        lo = h.old_start - 1 if h.old_lines else h.old_start    # an insertion names the line before
        if lo > i:
            out.append((i, j, lo - i))
        j += lo - i + h.new_lines
        i = lo + h.old_lines
    if len(old) > i:
        out.append((i, j, len(old) - i))
    out.append((len(old), len(new), 0))
    return out


def _sync_regions(base: list[bytes], a: list[bytes], b: list[bytes]):
    """Runs of base lines that both sides kept, as (base_lo, base_hi, a_lo, a_hi, b_lo, b_hi),
    ending with an empty region at the three ends."""
    ma, mb = _kept(base, a), _kept(base, b)
    out = []
    i = j = 0
    while i < len(ma) and j < len(mb):
        abase, amatch, alen = ma[i]
        bbase, bmatch, blen = mb[j]
        lo, hi = max(abase, bbase), min(abase + alen, bbase + blen)
        if lo < hi:
            out.append((lo, hi, amatch + lo - abase, amatch + hi - abase,
                        bmatch + lo - bbase, bmatch + hi - bbase))
        if abase + alen < bbase + blen:
            i += 1
        else:
            j += 1
    out.append((len(base), len(base), len(a), len(a), len(b), len(b)))
    return out


def one_side(base, ours, theirs):
    """The three-way answer when at most one side changed (or both alike); None when both
    changed, differently."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return None


def merge_lines(base: bytes, ours: bytes, theirs: bytes,
                is_import: Callable[[bytes], bool] | None = None) -> list[Segment]:
    """diff3 of three texts: clean runs as bytes, each conflicting hunk as a Clash."""
    picked = one_side(base, ours, theirs)
    if picked is not None:
        return [picked]
    lb, la, lt = lines(base), lines(ours), lines(theirs)
    out: list[Segment] = []
    zb = za = zt = 0
    for b_lo, b_hi, a_lo, a_hi, t_lo, t_hi in _sync_regions(lb, la, lt):
        hb, ha, ht = lb[zb:b_lo], la[za:a_lo], lt[zt:t_lo]
        if ha == hb:
            out.append(b"".join(ht))
        elif ht == hb or ha == ht:
            out.append(b"".join(ha))
        elif is_import is not None and not hb and all(is_import(x) for x in ha + ht):
            out.append(b"".join(ha + [x for x in ht if x not in ha]))
        else:
            out.append(Clash(b"".join(ha), b"".join(ht)))
        out.append(b"".join(lb[b_lo:b_hi]))
        zb, za, zt = b_hi, a_hi, t_hi
    return _joined(out)


def _joined(segments: list[Segment]) -> list[Segment]:
    """Adjacent bytes merged, empty ones dropped."""
    out: list[Segment] = []
    for s in segments:
        if isinstance(s, bytes):
            if not s:
                continue
            if out and isinstance(out[-1], bytes):
                out[-1] += s
                continue
        out.append(s)
    return out


def has_clash(segments: list[Segment]) -> bool:
    return any(isinstance(s, Clash) for s in segments)


def clean_bytes(segments: list[Segment]) -> bytes:
    """The text of segments that hold no Clash."""
    assert not has_clash(segments)
    return b"".join(segments)  # type: ignore[arg-type]


def render(segments: list[Segment], tag: str) -> bytes:
    """Segments with each Clash between sync's markers: the local side first, then trunk."""
    suffix = f" {tag}".encode() if tag else b""
    out: list[bytes] = []
    owed_newline = False    # a marker line ended a side that had no newline of its own
    for s in segments:
        if isinstance(s, bytes):
            out.append(s[1:] if owed_newline and s.startswith(b"\n") else s)
            owed_newline = False
            continue
        if out and not out[-1].endswith(b"\n"):
            out.append(b"\n")
        out.append(b"<<<<<<< local" + suffix + b"\n" + _line_end(s.local))
        out.append(b"=======" + suffix + b"\n" + _line_end(s.trunk))
        out.append(b">>>>>>> trunk" + suffix + b"\n")
        owed_newline = any(x and not x.endswith(b"\n") for x in (s.local, s.trunk))
    return b"".join(out)


def _line_end(data: bytes) -> bytes:
    return data if not data or data.endswith(b"\n") else data + b"\n"
