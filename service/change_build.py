"""Building a proposal in the bare store (pygit2) and computing its facts (lonca.symbols)."""
import asyncio
import base64
import binascii
import logging
import threading
from collections import OrderedDict
from typing import Callable, Iterator, Mapping, NamedTuple, TypeVar

import pygit2

from lonca.protocol import LoncaError
from lonca.queue.object_writer import TreeWriter, write_commit, write_object
from lonca.queue.tree_diff import file_changes
from lonca.symbols import SymbolCache, TreeEntry, compute_facts, mode_word

from . import random_ids
from .gitstore import DAEMON_SIG, commit_of, walk_tree
from .paths import check_path, check_symlink_target, check_tree

log = logging.getLogger("lonca.daemon")

MODES = {"regular": pygit2.GIT_FILEMODE_BLOB, "executable": pygit2.GIT_FILEMODE_BLOB_EXECUTABLE,
         "symlink": pygit2.GIT_FILEMODE_LINK}
OCTAL = {pygit2.GIT_FILEMODE_BLOB: "100644", pygit2.GIT_FILEMODE_BLOB_EXECUTABLE: "100755",
         pygit2.GIT_FILEMODE_LINK: "120000", pygit2.GIT_FILEMODE_COMMIT: "160000"}


def new_change_id() -> str:
    """32 letters k-z: the reverse hex of 16 random bytes (Jujutsu's change ids)."""
    return "".join(chr(ord("z") - int(c, 16)) for c in random_ids.token_bytes(16).hex())


def check_files(value: list[dict]) -> list[dict]:
    """The file changes of a request, whose shapes, modes and paths the method's schema checked
    (schemas.FILES): what it can not say is checked here. Each path named once, no submodule
    written, a symlink's path not one of git's own files, base64 that decodes."""
    out, seen = [], set()
    for f in value:
        path, mode = f["path"], f.get("mode")
        if mode == "symlink":
            check_path(path, symlink=True)
        if path in seen:
            raise LoncaError("invalid", f"the path {path!r} appears twice; name each file once")
        seen.add(path)
        if mode == "submodule":
            raise LoncaError("invalid", f"{path}: a change can not write a submodule; delete it (content_b64 null) "
                                        "or write a file in its place")
        content = f.get("content_b64")
        data = None
        if content is not None:
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise LoncaError("invalid", f"{path}: content_b64 is not base64") from None
        out.append({"path": path, "data": data, "mode": mode})
    return out


_ANCESTORS = 64     # how far back a held map is looked for; a whole walk costs ~1 µs a file
# blob sizes remembered: twice the files of the largest flat map held (each held commit's blobs,
# and those a few trunk moves replaced), at least _SIZES_MIN. A count fixed at 400,000 (about 60
# MB) filled with the blobs of history in a repository of 10,000 files, where every edit is a new
# blob; at 100,000 files it is 200,000, two whole trees' worth
_SIZES_MIN = 1024
# changed paths an overlay may hold before its map is made flat (a copy of the whole dict, which
# the collector then walks: TreeOverlay says why this is rare)
FLAT_AT = 512
_NEAR_FILES = 256   # files of difference made on the event loop (TreeMaps.near; a one-file change's costs ~0.1 ms)


class TreeMaps:
    """path -> TreeEntry of a commit's tree, kept for the last few commits (bases repeat). A
    commit one of whose recent ancestors' map is held (a trunk move's parent, or further back
    after a batch, whose middle commits nobody asked about) gets its map from that one and the
    subtrees that differ (tree_changes), not from a walk of its whole tree: a TreeOverlay on
    that map, made flat again (one copy in C) once it holds `flat_at` changed paths, so a trunk
    move copies no dict of 100 000 paths."""

    def __init__(self, size: int = 16, flat_at: int = FLAT_AT):
        self._maps: OrderedDict[str, Mapping[str, TreeEntry]] = OrderedDict()
        self._sizes: OrderedDict[str, int] = OrderedDict()      # blob id -> size (blobs never change)
        self._lock = threading.Lock()  # shared by the worker's threads
        self.size, self.flat_at = size, flat_at
        self._files = 0     # the files of the largest flat map put: what bounds _sizes

    def held(self, commit_id: str, wait: bool = True) -> Mapping[str, TreeEntry] | None:
        """The map if held; `wait=False` (the event loop): None while a thread holds the lock
        (SymbolCache.held says why)."""
        if not self._lock.acquire(wait):
            return None
        try:
            m = self._maps.get(commit_id)
            if m is not None:
                self._maps.move_to_end(commit_id)
            return m
        finally:
            self._lock.release()

    def get(self, repo: pygit2.Repository, commit_id: str) -> Mapping[str, TreeEntry]:
        held = self.held(commit_id)
        if held is not None:
            return held
        commit = repo.get(commit_id)
        ancestor, before = held_ancestor(commit, self.held)
        m: Mapping[str, TreeEntry]
        if before is not None:
            m = TreeOverlay(before, tree_changes(repo, ancestor.tree, commit.tree))
            if self._due(m):   # as near does: a held map never holds flat_at changed paths
                m = m.flat()
        else:
            m = tree_map(repo, commit.tree)
        self.put(commit_id, m)
        return m

    def near(self, repo: pygit2.Repository, commit_id: str) -> Mapping[str, TreeEntry] | None:
        """The map on the event loop, waiting for no lock: held, or made as `get` makes it from a
        held ancestor's (held_ancestor: a trunk moved by a batch of integrations, whose middle
        commits nobody asked about) with at most _NEAR_FILES files of difference; the first
        previews on a new trunk would otherwise all go to a thread until one made its map. None
        where that is not so, or where the held map is due to be made flat (a copy of the
        whole map, 2-10 ms at 100 000 files): an overlay made here that is due is flattened on a
        thread of the running loop at once, so the next trunk's is made here too."""
        held = self.held(commit_id, wait=False)
        if held is not None:
            return held
        try:
            commit = commit_of(repo, commit_id)
        except LoncaError:
            return None
        ancestor, before = held_ancestor(commit, lambda c: self.held(c, wait=False))
        if before is None or self._due(before):
            return None
        changes = tree_changes_upto(repo, ancestor.tree, commit.tree, _NEAR_FILES)
        if changes is None:
            return None     # a large merge: its walk would hold the loop
        m = TreeOverlay(before, changes)
        if self._lock.acquire(False):   # else a thread is putting one: the next preview puts it
            try:
                self._keep(commit_id, m)
            finally:
                self._lock.release()
            if self._due(m):   # nobody awaits it: a failure is logged, and the map stays an overlay
                asyncio.get_running_loop().run_in_executor(None, self._flatten, commit_id, m).add_done_callback(
                    _flatten_failed)
        return m

    def _due(self, m: Mapping[str, TreeEntry]) -> bool:
        """Whether `m` is an overlay to be made flat: it holds flat_at changed paths."""
        return isinstance(m, TreeOverlay) and len(m.changes) >= self.flat_at

    def _flatten(self, commit_id: str, m: "TreeOverlay") -> None:
        """(a thread) `m`, held for `commit_id`, held as one dict instead: the same map."""
        flat = m.flat()
        with self._lock:
            if self._maps.get(commit_id) is m:
                self._keep(commit_id, flat)     # as every map held: it counts toward the sizes' bound

    def entry(self, repo: pygit2.Repository, path: str, e: TreeEntry) -> dict:
        """The seed's tree entry of `e` at `path`, its size from the object's header once, then
        from memory (a header of a deltified packed object costs tens of µs)."""
        if e.mode == "160000":
            return {"path": path, "mode": "submodule", "blob": e.oid, "size": 0}
        size = self._sizes.get(e.oid)
        if size is None:
            size = repo.odb.read_header(e.oid)[1]
            with self._lock:
                self._sizes[e.oid] = size
                if len(self._sizes) > max(_SIZES_MIN, 2 * self._files):
                    self._sizes.popitem(last=False)
        return {"path": path, "mode": mode_word(e.mode), "blob": e.oid, "size": size}

    def put(self, commit_id: str, m: Mapping[str, TreeEntry]) -> None:
        with self._lock:
            self._keep(commit_id, m)

    def _keep(self, commit_id: str, m: Mapping[str, TreeEntry]) -> None:
        """(the lock held)"""
        if isinstance(m, dict):     # an overlay's len walks it; it is its flat base's, give or take its changes
            self._files = max(self._files, len(m))
        self._maps[commit_id] = m
        self._maps.move_to_end(commit_id)
        if len(self._maps) > self.size:
            self._maps.popitem(last=False)


def _flatten_failed(job: "asyncio.Future[None]") -> None:
    """A flat copy that failed leaves the overlay held; the next map past it is made on a thread
    (TreeMaps.get flattens it there)."""
    if not job.cancelled() and job.exception() is not None:
        log.error("a tree map's flat copy failed", exc_info=job.exception())


def tree_map(repo: pygit2.Repository, tree: pygit2.Tree) -> dict[str, TreeEntry]:
    return {p: TreeEntry(str(oid), OCTAL.get(m, "100644")) for p, oid, m in walk_tree(repo, tree)}


def tree_changes(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None) -> dict[str, TreeEntry | None]:
    """path -> the new TreeEntry (None where deleted) of every file that differs between two
    trees (lonca.queue.tree_diff: the cost is that of the change, not of the tree)."""
    changes = tree_changes_upto(repo, old, new, None)
    assert changes is not None
    return changes


def tree_changes_upto(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None,
                      most: int | None) -> dict[str, TreeEntry | None] | None:
    """tree_changes, or None as soon as more than `most` files differ (the walk stops there)."""
    changes: dict[str, TreeEntry | None] = {}
    for path, _, b in file_changes(repo, old, new):
        if len(changes) == most:
            return None
        changes[path] = None if b is None else TreeEntry(str(b.id), OCTAL.get(b.filemode, "100644"))
    return changes


def commit_exists(repo: pygit2.Repository, commit_id: str) -> bool:
    try:
        commit_of(repo, commit_id)
        return True
    except (LoncaError, TypeError):
        return False


def build_commit(repo: pygit2.Repository, base: str, files: list[dict], message: str, author: str, now_ms: int,
                 base_map: Mapping[str, TreeEntry], case_twins: bool = True) -> tuple[str, "TreeOverlay"]:
    """The commit of `files` (check_files's) on `base` (refs untouched) and the new tree's path
    map, read back from the tree written: what facts, leases and scope are decided on is what
    the commit holds, never the paths the request named. `case_twins`: whether a new name may
    differ from another only in case. Only the folders that hold a changed path are rewritten (a
    git index of the whole base tree cost 0.8 µs a file: 83 ms at 100 000 files)."""
    base_tree = repo.get(base).tree
    # every object through lonca.queue.object_writer, which lets the GIL go while a file is made
    edits = {path: None if e is None else (write_object(repo, b"blob", e[0]), e[1])
             for path, e in checked_edits(repo, base_tree, files, base_map, case_twins).items()}
    tree = repo[_write_tree(repo, base_tree, edits, "")]
    who = pygit2.Signature(author[:200] or "agent", DAEMON_SIG[1], now_ms // 1000, 0)
    commit = write_commit(repo, who, pygit2.Signature(*DAEMON_SIG, now_ms // 1000, 0), message, tree.id,
                          [pygit2.Oid(hex=base)])
    return str(commit), built_map(repo, base_tree, tree, base_map)


def checked_edits(repo: pygit2.Repository, base_tree: pygit2.Tree, files: list[dict], base_map: Mapping[str, TreeEntry],
                  case_twins: bool) -> dict[str, tuple[bytes, int] | None]:
    """path -> (content, mode) of each file `files` writes, None for each it deletes, once the
    change is checked against its base (check_tree, symlinks)."""
    check_tree(repo, base_tree, files, case_twins)
    edits: dict[str, tuple[bytes, int] | None] = {}
    for f in files:
        if f["data"] is None:
            edits[f["path"]] = None  # a file of the base: check_tree refused any other deletion
            continue
        mode = file_mode(f, base_map.get(f["path"]))
        if mode == pygit2.GIT_FILEMODE_LINK:
            check_path(f["path"], symlink=True)  # the mode may be the base's, kept by mode null
            check_symlink_target(f["path"], f["data"])
        edits[f["path"]] = (f["data"], mode)
    return edits


def planned_map(repo: pygit2.Repository, base: str, files: list[dict], base_map: Mapping[str, TreeEntry],
                case_twins: bool = True) -> tuple["TreeOverlay", dict[str, bytes]]:
    """The map of the tree build_commit would write for `files` on `base`, after the same checks,
    and the new blobs' bytes by id: nothing is written. A preview answers facts, never a commit;
    writing its blob, trees and commit and reading the trees back was three quarters of its CPU
    (1.6 against 0.4 ms, all of it holding the GIL) and left loose objects for the packer.
    Equal to build_commit's map (tests/test_preview_map.py): check_tree refuses every change whose
    tree would differ from its base's by more than the paths it names."""
    blobs: dict[str, bytes] = {}
    changes: dict[str, TreeEntry | None] = {}
    for path, e in checked_edits(repo, repo.get(base).tree, files, base_map, case_twins).items():
        if e is None:
            changes[path] = None
            continue
        oid = str(pygit2.hash(e[0]))
        blobs[oid] = e[0]
        changes[path] = TreeEntry(oid, OCTAL.get(e[1], "100644"))
    return TreeOverlay(base_map, changes), blobs


def file_mode(f: dict, old: TreeEntry | None) -> int:
    """The mode a file change writes: the one it names, else the base file's (a submodule's
    place takes a regular file), else regular."""
    if f["mode"]:
        return MODES[f["mode"]]
    return int(old.mode, 8) if old and old.mode != "160000" else pygit2.GIT_FILEMODE_BLOB


def built_map(repo: pygit2.Repository, base_tree: pygit2.Tree, tree: pygit2.Tree,
              base_map: Mapping[str, TreeEntry]) -> "TreeOverlay":
    """`base_map` with what differs between the two trees (blob, mode or type: tree_changes), so
    every path is seen as it was written, whatever the request named."""
    return TreeOverlay(base_map, tree_changes(repo, base_tree, tree))


T = TypeVar("T")


def held_ancestor(commit: pygit2.Commit, lookup: Callable[[str], T | None]) -> tuple[pygit2.Commit, T | None]:
    """The nearest first-parent ancestor of `commit` (at most _ANCESTORS back) that `lookup`
    holds something for, and that thing; (the last ancestor looked at, None) when none is held.
    What is held for it plus the trees' difference makes `commit`'s in the time of the change."""
    ancestor: pygit2.Commit = commit
    for _ in range(_ANCESTORS):
        if not ancestor.parents:
            break
        ancestor = ancestor.parents[0]
        found = lookup(str(ancestor.id))
        if found is not None:
            return ancestor, found
    return ancestor, None


class TreeOverlay(Mapping[str, TreeEntry]):
    """A tree's map as a flat map and the paths that differ from it (None where deleted): made in
    the time of the change. A copy of the base's dict cost 2-10 ms at 100 000 files (60 ms once
    deletions left holes in it), twice an integration (preview and proposal), holding the GIL.
    An overlay on an overlay is one layer on the flat map below both, its changes theirs merged
    (a copy of the changed paths only): a lookup is two dict lookups however many trunk moves
    stack. And the flat map stays the same dict for hundreds of moves: each copy of it was a
    new dict of 100 000 entries that the collector's young passes walked, entry by entry, until
    it grew old (47-66 ms passes at 100 000 files, measured in bench scale)."""

    __slots__ = ("base", "changes")

    def __init__(self, base: Mapping[str, TreeEntry], changes: dict[str, TreeEntry | None]) -> None:
        if isinstance(base, TreeOverlay):
            base, changes = base.base, base.changes | changes
        self.base: Mapping[str, TreeEntry] = base
        self.changes: dict[str, TreeEntry | None] = changes

    def flat(self) -> dict[str, TreeEntry]:
        """The same map as one dict: the flat one copied (in C), then the changes."""
        out = dict(self.base)
        for path, e in self.changes.items():
            if e is None:
                out.pop(path, None)
            else:
                out[path] = e
        return out

    def get(self, path, default=None):
        changes = self.changes
        if path in changes:
            e = changes[path]
            return default if e is None else e
        return self.base.get(path, default)

    def __getitem__(self, path: str) -> TreeEntry:
        e = self.get(path)
        if e is None:
            raise KeyError(path)
        return e

    def __contains__(self, path: object) -> bool:
        return self.get(path) is not None

    def __iter__(self) -> Iterator[str]:
        changes = self.changes
        yield from (p for p in self.base if changes.get(p, p) is not None)
        yield from (p for p, e in changes.items() if e is not None and p not in self.base)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _write_tree(repo: pygit2.Repository, tree: pygit2.Tree | None, edits: dict, prefix: str) -> pygit2.Oid | None:
    """`tree` with `edits` (path below `prefix` -> (blob, mode), None to delete); None for a
    folder left empty. Deletions come first, then folders, then files: a file may take the place
    of a folder the change empties, a folder the place of a file it deletes (check_tree refused
    every other clash)."""
    builder = TreeWriter(repo, tree)
    below: dict[str, dict] = {}
    here: dict[str, tuple[pygit2.Oid, int]] = {}
    for path, edit in edits.items():
        name, sep, _ = path[len(prefix):].partition("/")
        if sep:
            below.setdefault(name, {})[path] = edit
        elif edit is None:
            if builder.get(name) is not None:
                builder.remove(name)
        else:
            here[name] = edit
    for name, sub in below.items():
        held = builder.get(name)
        oid = _write_tree(repo, repo[held.id] if held is not None and held.filemode == pygit2.GIT_FILEMODE_TREE else None,
                          sub, prefix + name + "/")
        if oid is None:
            if builder.get(name) is not None:
                builder.remove(name)
        else:
            builder.insert(name, oid, pygit2.GIT_FILEMODE_TREE)
    for name, (oid, mode) in here.items():
        held = builder.get(name)
        if held is not None and held.filemode == pygit2.GIT_FILEMODE_TREE:
            raise LoncaError("invalid", f"the path {prefix + name!r} is a folder of the base: delete its files in the same change")
        builder.insert(name, oid, mode)     # its name passed service.paths: git's rules and more
    return builder.write() if len(builder) or not prefix else None


QUICK_BYTES = 16 * 1024    # the most old or new text a preview judged on the event loop reads, a file


class NotQuick(Exception):
    """A preview begun on the event loop needs what is not held or not small: it is run on a thread."""


def quick_base(repo: pygit2.Repository, maps: TreeMaps, cache: SymbolCache, base: str,
               files: list[dict]) -> Mapping[str, TreeEntry] | None:
    """`base`'s map when a preview of `files` (check_files's) may be judged on the event loop
    (`repo`, the loop's own handle): the map held or near (TreeMaps.near), each path written (none deleted: its symbols go) with at most QUICK_BYTES as a
    regular file, either new or a regular file of the base whose symbol table is held (by the
    cache, or by the base's index: compute_facts takes the old side's table from it); else None.
    No lock is waited for: a thread holding one would first need the GIL back."""
    base_map = maps.near(repo, base)
    if base_map is None:
        return None
    old = []
    for f in files:
        if f["data"] is None or len(f["data"]) > QUICK_BYTES or f["mode"] == "symlink":
            return None
        e = base_map.get(f["path"])
        if e is not None:
            if e.mode not in ("100644", "100755"):
                return None
            old.append((f["path"], e.oid))
    index = cache.base_index(base, wait=False)
    if index is not None:
        old = [(path, oid) for path, oid in old if (held := index.files.get(path)) is None or held[0] != oid]
    tables = cache.held(old, wait=False)
    return None if tables is None or None in tables else base_map


class Previewed(NamedTuple):
    """What facts.preview answers from, made by `previewed` where it is judged (the event loop
    or a thread: change_methods.prepare_preview)."""
    facts: dict                 # facts_json
    syntax_errors: list[str]
    containers: dict            # Facts.containers: added id -> (container, name)
    nesting: dict               # Facts.nesting: id -> container, where names may hold dots


def previewed(repo: pygit2.Repository, cache: SymbolCache, base: str, base_map: Mapping[str, TreeEntry],
              files: list[dict], case_twins: bool, redacted: frozenset[str], quick: bool) -> Previewed:
    """The facts of `files` (check_files's) on `base`, whose map is `base_map`: nothing is
    written (planned_map). `quick` as facts_of's."""
    new_map, blobs = planned_map(repo, base, files, base_map, case_twins)
    facts = facts_of(repo, cache, base, base_map, new_map, files, blobs, redacted, quick=quick)
    return Previewed(facts_json(facts), list(facts.syntax_errors), facts.containers, facts.nesting)


def facts_json(facts) -> dict:
    """The facts as answers carry them: their syntax errors are answered apart."""
    out = facts.to_json()
    out.pop("syntax_errors", None)
    return out


def facts_of(repo: pygit2.Repository, cache: SymbolCache, base: str, base_map: Mapping[str, TreeEntry],
             new_map: Mapping[str, TreeEntry], files: list[dict] | None = None, blobs: Mapping[str, bytes] | None = None,
             redacted: frozenset[str] = frozenset(), quick: bool = False):
    """Facts of a proposal on commit `base` (whose index the symbol warmer may have kept);
    `files`, the proposal's (check_files), names every path that can differ: its paths, and
    the folders above them, where a file may have given way to a folder (build_commit).
    `blobs`: bytes by id of blobs not in the store (planned_map's). `redacted` blobs are never
    read: each is one whole file of no lines (what an answer derives from contents, it must not
    derive from theirs; docs/decisions.md, "Reads derived from a redacted blob's contents").
    `quick` (on the event loop; `files` given): NotQuick before reading any blob but the old ones
    of the paths named, each at most QUICK_BYTES, and when a symbol is deleted or re-signed (its
    `affected` would read the files that mention it); else the same facts as without it."""
    paths = None
    if files is not None:
        paths = set()
        for f in files:
            parts = f["path"].split("/")
            paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    extra = blobs or {}
    if not quick:
        return compute_facts(base_map, new_map, lambda oid: extra[oid] if oid in extra else repo[oid].data,
                             cache, base, paths, opaque=redacted)
    named = {e.oid for f in files or () if (e := base_map.get(f["path"])) is not None}

    def load(oid: str) -> bytes:
        if oid in extra:
            return extra[oid]
        if oid not in named or repo.odb.read_header(oid)[1] > QUICK_BYTES:
            raise NotQuick(oid)
        return repo[oid].data
    # with no symbol gone, `affected` is empty: the facts are those computed with it
    facts = compute_facts(base_map, new_map, load, cache, base, paths, affected=False, opaque=redacted)
    if facts.deletes or facts.signature_changes:
        raise NotQuick("a symbol is gone")
    return facts
