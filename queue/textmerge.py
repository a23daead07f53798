"""A three-way line merge (diff3) in Python, for the pieces the symbol merge hands it.

libgit2 has already line-merged the whole file when this runs; this merges parts of it (one
symbol, the text between symbols) and keeps each conflict as a `Clash` so that `sync` can write
it with its own markers. A conflicting hunk in which every line is an import (or blank) is
settled by taking both sides' additions and both sides' removals: imports added on both sides
at one place are the commonest false conflict.
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Callable, Union


@dataclass(frozen=True)
class Clash:
    """Both sides of one conflict: `trunk` is ours (trunk), `local` is theirs (the change)."""
    trunk: bytes
    local: bytes


Segment = Union[bytes, Clash]


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _sync_regions(base: list[bytes], a: list[bytes], b: list[bytes]):
    """Runs of base lines that both sides kept, as (base_lo, base_hi, a_lo, a_hi, b_lo, b_hi),
    ending with an empty region at the three ends."""
    ma = SequenceMatcher(None, base, a, autojunk=False).get_matching_blocks()
    mb = SequenceMatcher(None, base, b, autojunk=False).get_matching_blocks()
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
        elif is_import is not None and all(is_import(x) for x in hb + ha + ht):
            out.append(b"".join(_union(hb, ha, ht)))
        else:
            out.append(Clash(b"".join(ha), b"".join(ht)))
        out.append(b"".join(lb[b_lo:b_hi]))
        zb, za, zt = b_hi, a_hi, t_hi
    return _joined(out)


def _union(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> list[bytes]:
    """Ours' lines that theirs did not remove, then theirs' additions."""
    kept = [x for x in ours if x in theirs or x not in base]
    return kept + [x for x in theirs if x not in ours and x not in base]


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
