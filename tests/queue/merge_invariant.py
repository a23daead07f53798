"""The merge invariant of issue 11, checked from outside the merge code.

For a merge of one file (base, ours = trunk, theirs = the change) that succeeded:
- every symbol one side changed relative to the base and the other did not is in the result as
  that side wrote it (deleted if it deleted it);
- a symbol both sides changed the same way is in the result once, as they wrote it;
- a symbol both sides changed differently is in the result as `git merge-file` (git's own
  program, run here) merges its three texts, and that merge is clean; an addition against an
  addition or a deletion against an edit is never in a clean result;
- no name appears in one scope of the result more often than on either side.
A merge that conflicts satisfies it. Symbols are compared by id, at the innermost level (a class
whose methods both sides changed is checked through its methods). Ids a side renamed, and names
defined twice in one scope on some side (their numbering moves), are left to the expected texts
of the corpus: they have no id that means the same thing in all four versions.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter

from lonca.symbols import TreeEntry, compute_facts, symbol_table
from lonca.symbols.twins import first_id, one_definition

_NOT_SYMBOLS = ("file", "def")
_TWIN_MARK = re.compile(r"~[0-9]+")


def leaves(path: str, data: bytes | None):
    """(text of each innermost symbol, ids of containers, copies per first id of names defined
    once by design, texts of the innermost definitions per first id); None when the text does
    not parse."""
    if data is None:
        return {}, set(), {}, {}
    table = symbol_table(path, data)
    if table.status != "parsed":
        return None
    syms = [s for s in table.symbols if s.kind not in _NOT_SYMBOLS]
    containers = {s.id for s in syms for o in syms
                  if o is not s and s.start_byte <= o.start_byte and o.end_byte <= s.end_byte
                  and (o.start_byte, o.end_byte) != (s.start_byte, s.end_byte)}
    copies: dict[str, int] = {}
    groups: dict[str, tuple[bytes, ...]] = {}
    for s in syms:
        key = first_id(s.id)
        if s.id not in containers:      # a container is checked through what it holds
            groups[key] = groups.get(key, ()) + (data[s.start_byte:s.end_byte],)
        if one_definition(path, s.name):
            copies[key] = copies.get(key, 0) + 1
    return ({s.id: data[s.start_byte:s.end_byte] for s in syms if s.id not in containers},
            containers, copies, groups)


def _expected(b: bytes | None, o: bytes | None, t: bytes | None) -> tuple[bytes | None, str | None]:
    """What a clean merge must hold of a symbol whose base/ours/theirs texts are b, o, t (None:
    absent): the text, or why the merge should have been a conflict."""
    if o == t or t == b:
        return o, None
    if o == b:
        return t, None
    if b is None or o is None or t is None:
        return None, "both added it" if b is None else "deleted against edited"
    merged = git_merge_file(b, o, t)
    return merged, None if merged is not None else "both sides changed it, git conflicts on it"


def renamed_ids(path: str, before: bytes | None, after: bytes | None) -> set[str]:
    """Ids of what a side renamed: the facts' renames, and every symbol whose text, but for
    its name, is that of one the side deleted (what a merge may also take for a rename)."""
    if before is None or after is None:
        return set()
    blobs = {"b": before, "a": after}
    facts = compute_facts({path: TreeEntry("b", "100644")}, {path: TreeEntry("a", "100644")}, blobs.__getitem__)
    out = {i for pair in facts.renames for i in pair}
    old, new = ({s.id: (s.name, data[s.start_byte:s.end_byte]) for s in symbol_table(path, data).symbols
                 if s.kind not in _NOT_SYMBOLS} for data in (before, after))
    gone, added = old.keys() - new.keys(), new.keys() - old.keys()
    for g in gone:
        for a in added:
            (old_name, old_text), (new_name, new_text) = old[g], new[a]
            if new_text.replace(new_name.encode(), old_name.encode(), 1) == old_text:
                out |= {g, a}
    return out


def git_merge_file(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """git's own three-way merge of three texts; None when it conflicts."""
    with tempfile.TemporaryDirectory() as d:
        names = []
        for n, x in (("ours", ours), ("base", base), ("theirs", theirs)):
            names.append(os.path.join(d, n))
            with open(names[-1], "wb") as f:
                f.write(x)
        res = subprocess.run(["git", "merge-file", "-p", *names], capture_output=True, timeout=30)
    return res.stdout if res.returncode == 0 else None


def _group_problem(b: Counter, o: Counter, t: Counter, m: Counter) -> str | None:
    """The definitions of one name, as multisets of texts: each side's removals and additions
    must all be in the result, and no definition may be removed by both sides when either
    added one (an edit, or a deletion against an edit)."""
    removed_o, removed_t = b - o, b - t
    if o != t and removed_o & removed_t and (o - b or t - b):
        return "both sides removed or changed one definition, yet the merge is clean"
    want = (b - (removed_o | removed_t)) + (o - b) + (t - b) if o != t else o
    return None if m == want else f"the result holds {sorted(m.elements())!r}, the sides wrote {sorted(want.elements())!r}"


def violations(path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None,
               merged: bytes | None) -> list[str] | None:
    """What a clean merge `merged` (None: the file is gone) breaks of the invariant; None when a
    version does not parse (nothing to say by symbols)."""
    versions = [leaves(path, x) for x in (base, ours, theirs, merged)]
    if any(v is None for v in versions):
        return None
    (B, cb, nb, gb), (O, co, no, go), (T, ct, nt, gt), (M, cm, nm, gm) = versions
    out = [f"{k} is defined {n} times in one scope, ours {no.get(k, 0)}, theirs {nt.get(k, 0)}"
           for k, n in nm.items() if n > 1 and n > max(no.get(k, 0), nt.get(k, 0))]
    # a name defined twice in one scope on some side: its definitions are one unit, as their
    # numbering (`f`, `f~2`) moves when one is added, deleted or renamed
    twins = {k for g in (gb, go, gt, gm) for k, v in g.items() if len(v) > 1}
    skip = renamed_ids(path, base, ours) | renamed_ids(path, base, theirs)
    for k in sorted(twins - {first_id(r) for r in skip}):
        why = _group_problem(*(Counter(g.get(k, ())) for g in (gb, go, gt, gm)))
        if why:
            out.append(f"{k} (defined more than once): {why}")
    containers = cb | co | ct | cm
    for sid in sorted((B.keys() | O.keys() | T.keys()) - skip - containers):
        plain = _TWIN_MARK.sub("", sid)
        if any(plain == k or plain.startswith(k + ".") for k in map(_TWIN_MARK.sub, [""] * len(twins), twins)):
            continue
        b, o, t, m = B.get(sid), O.get(sid), T.get(sid), M.get(sid)
        if o == b and t == b:
            continue
        want, why = _expected(b, o, t)
        if why:
            out.append(f"{sid}: {why}, yet the merge is clean")
        elif m != want:
            out.append(f"{sid}: the result has {m!r}, the side that changed it wrote {want!r}")
    return out
