"""Three-way merges of trees in memory, with pygit2, and integration commits.

Two paths give the same answer:
- quick: the change's own edits (tree_diff.file_changes, which skips equal subtrees) touch only
  paths trunk left as they were in the base, so they are applied to trunk's tree directly. This
  is the common case in a queue and costs a few tree writes;
- full: libgit2's `merge_trees` (rename detection included), then every file it leaves in
  conflict is merged by symbols (symbol_merge.py). A file that either side cannot parse keeps
  the line merge's answer, a conflict. A file both sides changed that git merged cleanly is
  merged again by symbols when git's answer does not keep, symbol by symbol, what each side
  did. Last, a file that defines a name in one scope more often than either side did (both
  added it, or one added or renamed onto the other's new name) is `conflict:<symbol>`.

Nothing here touches a ref: the worker moves trunk itself once the integration is logged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pygit2
from pygit2.enums import FileMode

from lonca.symbols import SymbolCache, symbol_table
from lonca.symbols.twins import first_id, is_overload_stub, one_definition

from .object_writer import TreeWriter, write_commit
from .symbol_merge import FileMerge, SymbolMerger, empty_outline, import_lines, outline
from .textmerge import Clash, Segment, clean_bytes, has_clash, merge_lines, one_side, render
from .tree_diff import file_changes

_TEXT_MODES = (FileMode.BLOB, FileMode.BLOB_EXECUTABLE)


@dataclass
class MergeResult:
    tree: str | None                    # the merged tree, None when anything conflicts
    conflicts: list[str] = field(default_factory=list)      # symbol ids, `path#<file>` whole
    merged_paths: list[str] = field(default_factory=list)   # changed on both sides, merged
    conflict_segments: dict[str, list[Segment] | None] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.tree is not None

    @property
    def conflicted_paths(self) -> list[str]:
        return sorted(self.conflict_segments)

    def conflict_text(self, path: str, tag: str = "") -> bytes | None:
        """The file as sync writes it: everything merged, and each conflict between
        `<<<<<<< local <tag>`, `======= <tag>` and `>>>>>>> trunk <tag>` (a symbol whole or by
        lines). None for a path without a conflict, or one with no text (binary, symlink,
        submodule, a rename against a rename)."""
        segments = self.conflict_segments.get(path)
        return None if segments is None else render(segments, tag)


@dataclass
class Integration:
    commit: str | None                  # the new commit on trunk, None on a conflict
    merge: MergeResult

    @property
    def tree(self) -> str | None:
        return self.merge.tree

    @property
    def conflicts(self) -> list[str]:
        return self.merge.conflicts


def _tree(repo: pygit2.Repository, rev: pygit2.Oid | str) -> pygit2.Tree:
    return repo[rev].peel(pygit2.Tree)


def merge_trees(repo: pygit2.Repository, base: pygit2.Oid | str, ours: pygit2.Oid | str,
                theirs: pygit2.Oid | str, cache: SymbolCache | None = None) -> MergeResult:
    """Merge `theirs` (the change) into `ours` (trunk) from their common `base`; each a commit
    or a tree id."""
    tb, to, tt = _tree(repo, base), _tree(repo, ours), _tree(repo, theirs)
    if tt.id == tb.id or tt.id == to.id:
        return MergeResult(str(to.id))
    if to.id == tb.id:
        return MergeResult(str(tt.id))
    quick = _apply_one_side(repo, tb, to, tt)
    if quick is not None:
        return MergeResult(str(quick))
    return _full_merge(repo, tb, to, tt, cache if cache is not None else SymbolCache())


# --- the quick path -------------------------------------------------------------------------

class _NotQuick(Exception):
    pass


def _entry(tree: pygit2.Tree, path: str) -> tuple[pygit2.Oid, int] | None:
    try:
        obj = tree[path]
    except (KeyError, TypeError):
        return None
    return obj.id, obj.filemode


def _apply_one_side(repo: pygit2.Repository, base: pygit2.Tree, ours: pygit2.Tree,
                    theirs: pygit2.Tree) -> pygit2.Oid | None:
    """Trunk's tree with the change's edits applied, when trunk left every path they touch as
    the base had it; None otherwise."""
    edits: dict[str, dict[str, tuple[pygit2.Oid, int] | None]] = {}
    for path, old, new in file_changes(repo, base, theirs):
        before = None if old is None else (old.id, old.filemode)
        if _entry(ours, path) != before:
            return None
        after = None if new is None else (new.id, new.filemode)
        folder, _, name = path.rpartition("/")
        edits.setdefault(folder, {})[name] = after
    try:
        return _rebuild(repo, ours, "", edits)
    except _NotQuick:
        return None


def _rebuild(repo: pygit2.Repository, tree: pygit2.Tree | None, folder: str,
             edits: dict[str, dict]) -> pygit2.Oid | None:
    """`tree` (the folder `folder` of trunk) with the edits under it; None when it ends empty."""
    builder = TreeWriter(repo, tree)   # its write lets the GIL go (object_writer)
    for name, entry in edits.get(folder, {}).items():
        if entry is None:
            if builder.get(name) is not None:
                builder.remove(name)
        else:
            builder.insert(name, entry[0], entry[1])
    prefix = folder + "/" if folder else ""
    subfolders = {f[len(prefix):].split("/", 1)[0] for f in edits
                  if f.startswith(prefix) and f != folder}
    for name in subfolders:
        current = builder.get(name)
        if current is not None and current.filemode != FileMode.TREE:
            raise _NotQuick     # a file where the change needs a folder
        sub = _rebuild(repo, repo[current.id] if current is not None else None,
                       prefix + name, edits)
        if sub is None:
            if current is not None:
                builder.remove(name)
        else:
            builder.insert(name, sub, FileMode.TREE)
    return builder.write() if len(builder) else None


# --- the full path --------------------------------------------------------------------------

def _changed_paths(repo: pygit2.Repository, a: pygit2.Tree, b: pygit2.Tree) -> set[str]:
    return {path for path, _, _ in file_changes(repo, a, b)}


def _full_merge(repo: pygit2.Repository, base: pygit2.Tree, ours: pygit2.Tree,
                theirs: pygit2.Tree, cache: SymbolCache) -> MergeResult:
    index = repo.merge_trees(base, ours, theirs)
    conflicts: list[str] = []
    segments: dict[str, list[Segment] | None] = {}
    resolved: list[pygit2.IndexEntry] = []
    for entries in list(index.conflicts or ()):
        path, merged, file_conflicts, text = _merge_file(repo, *entries, cache=cache)
        if merged is None:
            conflicts.extend(file_conflicts)
            segments[path] = text
        else:
            resolved.append(merged)
    for entry in resolved:
        del index.conflicts[entry.path]
        index.add(entry)
    both = _changed_paths(repo, base, ours) & _changed_paths(repo, base, theirs)
    settled = {e.path for e in resolved}
    for path in sorted(both - set(segments) - settled):
        if not _git_answer_holds(repo, path, [base, ours, theirs], _merged_oid(index, path), cache):
            _, merged, file_conflicts, text = _merge_file(
                repo, *(_index_entry(t, path) for t in (base, ours, theirs)), cache=cache)
            if merged is None:
                conflicts.extend(file_conflicts)
                segments[path] = text
            else:
                index.add(merged)
    for path in sorted(both - set(segments)):
        twins = _new_twins(repo, path, index, ours, theirs, cache)
        if twins:
            conflicts.extend(f"{path}#{t}" for t in twins)
            segments[path] = _twin_segments(repo, path, index, ours, cache, twins)
    merged_paths = sorted(p for p in both if p not in segments
                          and _entry(ours, p) != _entry(theirs, p))
    if conflicts:
        return MergeResult(None, conflicts, merged_paths, segments)
    return MergeResult(str(index.write_tree(repo)), [], merged_paths)


def _whole_file(path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None,
                textual: bool) -> tuple[str, None, list[str], list[Segment] | None]:
    """A conflict of the whole file; its text is the line merge's when there is one."""
    if not textual:
        return path, None, [f"{path}#<file>"], None
    if base is not None and ours is not None and theirs is not None:
        segs = merge_lines(base, ours, theirs)
        if has_clash(segs):
            return path, None, [f"{path}#<file>"], segs
    return path, None, [f"{path}#<file>"], [Clash(ours or b"", theirs or b"")]


def _is_text(data: bytes) -> bool:
    return b"\0" not in data


def _merge_file(repo: pygit2.Repository, anc: pygit2.IndexEntry | None,
                ours: pygit2.IndexEntry | None, theirs: pygit2.IndexEntry | None,
                cache: SymbolCache):
    """(path, merged entry or None, conflicts, segments for conflict_text) of one file the
    line merge left in conflict."""
    path = (ours or theirs or anc).path
    data = {k: (repo[e.id].data if e is not None and e.mode in _TEXT_MODES else None)
            for k, e in (("b", anc), ("o", ours), ("t", theirs))}
    textual = all(d is None or _is_text(d) for d in data.values())
    if ours is None or theirs is None or ours.path != theirs.path or (anc and anc.path != path):
        return _whole_file(path, data["b"], data["o"], data["t"], textual)
    if data["o"] is None or data["t"] is None or (anc is not None and data["b"] is None):
        return _whole_file(path, None, None, None, False)
    mode = one_side(anc.mode if anc else None, ours.mode, theirs.mode)
    if mode is None or not textual:
        return _whole_file(path, data["b"], data["o"], data["t"], textual)
    tables = [cache.table(path, str(e.id), lambda d=d: d)      # the bytes are read already
              for e, d in ((anc, data["b"]), (ours, data["o"]), (theirs, data["t"])) if e is not None]
    if any(t.status != "parsed" for t in tables):
        return _whole_file(path, data["b"], data["o"], data["t"], True)
    texts = [d for d in (data["b"], data["o"], data["t"]) if d is not None]
    shifted = _twins_changed_on_both(tables, texts) if anc is not None else []
    if shifted:
        segs = merge_lines(data["b"], data["o"], data["t"])
        return path, None, [f"{path}#{k}" for k in shifted], segs if has_clash(segs) else [Clash(data["o"], data["t"])]
    own_ids = {s.id for t in tables for s in t.symbols}
    merger = SymbolMerger(path, own_ids, import_lines(tables, texts))
    base_outline = outline(tables[0], data["b"]) if anc is not None else empty_outline()
    outlines = [base_outline, outline(tables[-2], data["o"]), outline(tables[-1], data["t"])]
    if any(o.units for o in outlines) and not all(o.units for o in outlines[1:]):
        # a side without a single symbol has no first symbol to end its head and no last to
        # start its tail: the other side's symbols would have nothing to stand beside
        return _whole_file(path, data["b"], data["o"], data["t"], True)
    result: FileMerge = merger.merge(*outlines)
    if result.conflicts:
        return path, None, result.conflicts, result.segments
    merged = clean_bytes(result.segments)
    if symbol_table(path, merged).status != "parsed":
        # a splice the grammar can no longer read: the line merge's answer stands
        return _whole_file(path, data["b"], data["o"], data["t"], True)
    return path, pygit2.IndexEntry(path, repo.create_blob(merged), mode), [], None


def _twins_changed_on_both(tables: list, texts: list[bytes]) -> list[str]:
    """Names defined more than once in one scope (`f`, `f~2`) on some side whose definitions
    both sides changed. Their ids are numbered in file order, so a definition one side adds,
    deletes or renames shifts the ids of the others: matched by id, trunk's deletion of `f`
    would meet the change's edit of what was `f~2`, and a deletion would look like the other
    side's rename of the same definition out of the group. Changed on one side only, the
    group is that side's, id by id."""
    groups = []
    for table, data in zip(tables, texts):
        g: dict[str, list[bytes]] = {}
        for s in table.symbols:
            if s.kind not in ("file", "def"):
                g.setdefault(first_id(s.qualified), []).append(data[s.start_byte:s.end_byte])
        groups.append(g)
    b, o, t = groups
    twins = {k for g in groups for k, v in g.items() if len(v) > 1}
    return sorted(k for k in twins if b.get(k) != o.get(k) and b.get(k) != t.get(k))


# --- one name, one definition ---------------------------------------------------------------

def _parsed(repo: pygit2.Repository, path: str, oid: pygit2.Oid | None, cache: SymbolCache):
    """(symbol table, bytes) of a text blob; None when it is absent, binary or does not parse."""
    if oid is None:
        return None
    data = repo[oid].data
    if not _is_text(data):
        return None
    table = cache.table(path, str(oid), lambda: data)
    return (table, data) if table.status == "parsed" else None


def _copies(path: str, parsed) -> dict[str, list]:
    """Definitions by id, those of a name nothing tells apart (`f`, `f~2`) under the first id;
    only names the language means to define once (symbols/twins.py)."""
    out: dict[str, list] = {}
    if parsed is None:
        return out
    table, data = parsed
    for s in table.symbols:
        if s.kind not in ("file", "def") and one_definition(path, s.name) \
                and not is_overload_stub(path, data[s.start_byte:s.end_byte]):
            out.setdefault(first_id(s.qualified), []).append(s)
    return out


def _index_entry(tree: pygit2.Tree, path: str) -> pygit2.IndexEntry | None:
    found = _entry(tree, path)
    return pygit2.IndexEntry(path, found[0], found[1]) if found else None


def _innermost(table, data: bytes) -> tuple[dict[str, bytes], set[str]]:
    """(text of each symbol with no symbol inside it, by id; the ids of the others)."""
    spans = sorted((s for s in table.symbols if s.kind not in ("file", "def")),
                   key=lambda s: (s.start_byte, -s.end_byte))
    inner, outer = {}, set()
    for s, after in zip(spans, spans[1:] + [None]):
        if after is None or after.start_byte >= s.end_byte:
            inner[s.id] = data[s.start_byte:s.end_byte]
        else:
            outer.add(s.id)
    return inner, outer


def _git_answer_holds(repo: pygit2.Repository, path: str, trees: list[pygit2.Tree],
                      merged: pygit2.Oid | None, cache: SymbolCache) -> bool:
    """Whether git's clean line merge of a file both sides changed keeps, symbol by symbol,
    what each side did: every innermost symbol one side changed is as that side left it, and
    no symbol was changed by both, differently. A line merge can break this cleanly: trunk
    moves a function's body into a new one and the change's edit of the old body follows the
    lines into it; the change moves a function trunk deleted and the move brings it back.
    Absent or unread on a side: the line merge's answer stands, as for conflicts."""
    parsed = [_parsed(repo, path, _oid(t, path), cache) for t in trees] + [_parsed(repo, path, merged, cache)]
    if any(p is None for p in parsed):
        return True
    (b, ob), (o, oo), (t, ot), (m, om) = (_innermost(*p) for p in parsed)
    for key in (b.keys() | o.keys() | t.keys()) - (ob | oo | ot | om):
        tb, to, tt = b.get(key), o.get(key), t.get(key)
        if to != tb and tt != tb and to != tt:
            return False
        if m.get(key) != (to if tt == tb else tt):
            return False
    return True


def _merged_oid(index: pygit2.Index, path: str) -> pygit2.Oid | None:
    try:
        return index[path].id
    except KeyError:
        return None


def _new_twins(repo: pygit2.Repository, path: str, index: pygit2.Index, ours: pygit2.Tree,
               theirs: pygit2.Tree, cache: SymbolCache) -> list[str]:
    """Names the merged file defines more often in one scope than either side did: both sides
    added it (apart, so the line merge kept both), or one side added or renamed onto a name the
    other side added meanwhile. Each side's own twins stand."""
    merged = _copies(path, _parsed(repo, path, _merged_oid(index, path), cache))
    if not any(len(v) > 1 for v in merged.values()):
        return []
    counts = [{k: len(v) for k, v in _copies(path, _parsed(repo, path, _oid(t, path), cache)).items()}
              for t in (ours, theirs)]
    return sorted(k for k, v in merged.items() if len(v) > 1 and len(v) > max(c.get(k, 0) for c in counts))


def _oid(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    found = _entry(tree, path)
    return found[0] if found else None


def _twin_segments(repo: pygit2.Repository, path: str, index: pygit2.Index, ours: pygit2.Tree,
                   cache: SymbolCache, twins: list[str]) -> list[Segment]:
    """The merged file for sync, each definition trunk does not have marked as the change's
    own (a conflict whose trunk side is empty): trunk's definitions stand where they are."""
    merged_parsed = _parsed(repo, path, _merged_oid(index, path), cache)
    data = merged_parsed[1]
    merged = _copies(path, merged_parsed)
    trunk_parsed = _parsed(repo, path, _oid(ours, path), cache)
    trunk = _copies(path, trunk_parsed)
    spans = []
    for key in twins:
        left = [trunk_parsed[1][s.start_byte:s.end_byte] for s in trunk.get(key, [])]
        for s in merged[key]:
            text = data[s.start_byte:s.end_byte]
            if text in left:
                left.remove(text)
            else:
                spans.append((s.start_byte, s.end_byte))
    out: list[Segment] = []
    pos = 0
    for lo, hi in sorted(spans):
        out += [data[pos:lo], Clash(b"", data[lo:hi])]
        pos = hi
    return out + [data[pos:]]


# --- integration ----------------------------------------------------------------------------

def integrate(repo: pygit2.Repository, trunk_commit: pygit2.Oid | str,
              change_commit: pygit2.Oid | str, change_base: pygit2.Oid | str, message: str,
              author: pygit2.Signature, committer: pygit2.Signature | None = None,
              cache: SymbolCache | None = None) -> Integration:
    """A commit on top of `trunk_commit` holding the change (its tree when its base is trunk,
    else the merge), or the conflicts. Creates objects only, never moves a ref."""
    trunk = repo[trunk_commit].peel(pygit2.Commit)
    change = repo[change_commit].peel(pygit2.Commit)
    if str(repo[change_base].peel(pygit2.Commit).id) == str(trunk.id):
        result = MergeResult(str(change.tree_id))
    else:
        result = merge_trees(repo, change_base, trunk.id, change.id, cache)
    if result.tree is None:
        return Integration(None, result)
    oid = write_commit(repo, author, committer or author, message, pygit2.Oid(hex=result.tree), [trunk.id])
    return Integration(str(oid), result)
