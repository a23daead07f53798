"""One bare git store per repository, with pygit2: creating trunk, reading trees and blobs
(importing a branch is service/remotes.py's)."""
import base64
import logging
import os
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

import pygit2

from lonca.protocol import LoncaError

TRUNK_REF = "refs/heads/main"
UNMEDIATED_REFS = "refs/lonca/unmediated/"  # commits trunk's ref was moved to outside Lonca, kept
LOCK_GRACE_S = 5.0  # a lock this young may be one a live writer is about to open
log = logging.getLogger("lonca.daemon")
DAEMON_SIG = ("Lonca", "daemon@lonca.invalid")
# libgit2 keeps the trees and commits it reads or writes in one cache for the process, up to 256 MiB
# by default: a worker that took thousands of proposals (each new trees and a commit, read once
# when merged) filled it, 100 MB in three minutes of the soak bench. What is read again is trunk's
# few newest trees and commits; the worker keeps its own maps of trees (TreeMaps).
OBJECT_CACHE_BYTES = 32 * 1024 * 1024
# libgit2 maps windows of pack files (1 GiB each) into the process and unmaps them only past 8 GiB
# mapped: the pages of every pack read stay in the worker's RSS, and the packer (store_packer.py)
# adds a pack each 6,700 proposals' objects, so RSS grew by the packs (15 MB in 3 minutes of the soak
# bench). Past this bound, libgit2 unmaps the windows used least recently (the kernel keeps the
# pages cached for the next map); the packs' indexes are mapped apart, whole.
PACK_MAPPED_BYTES = 32 * 1024 * 1024


def limit_caches() -> None:
    """The process's git caches bounded (the settings are libgit2's, one for the process)."""
    pygit2.settings.cache_max_size(OBJECT_CACHE_BYTES)
    pygit2.settings.mwindow_mapped_limit = PACK_MAPPED_BYTES

_MODES = {
    pygit2.GIT_FILEMODE_BLOB: "regular",
    pygit2.GIT_FILEMODE_BLOB_EXECUTABLE: "executable",
    pygit2.GIT_FILEMODE_LINK: "symlink",
    pygit2.GIT_FILEMODE_COMMIT: "submodule",
}


def mode_name(filemode: int) -> str:
    return _MODES.get(filemode, "regular")


def init_store(path: Path) -> pygit2.Repository:
    """A new bare store whose HEAD names trunk: `git clone <store>` checks trunk out. (git's own
    default, `master` or init.defaultBranch, names a branch a store never has.)"""
    return pygit2.init_repository(str(path), bare=True, initial_head=TRUNK_REF)


def head_to_trunk(repo: pygit2.Repository) -> bool:
    """HEAD names trunk's ref again in a store made before init_store did so; True when it moved."""
    head = repo.references.get("HEAD")
    if head is not None and head.type == pygit2.enums.ReferenceType.SYMBOLIC and head.target == TRUNK_REF:
        return False
    repo.set_head(TRUNK_REF)
    return True


def create_empty(path: Path, now_ms: int) -> str:
    """A bare store whose trunk is one commit of the empty tree."""
    repo = init_store(path)
    tree = repo.TreeBuilder().write()
    sig = pygit2.Signature(*DAEMON_SIG, now_ms // 1000, 0)
    oid = repo.create_commit(TRUNK_REF, sig, sig, "Lonca: empty trunk\n", tree, [])
    return str(oid)


def open_store(path: Path) -> pygit2.Repository:
    return pygit2.Repository(str(path))


class ThreadHandles:
    """Each thread's own handle on each store (a pygit2 Repository is never shared between
    threads), opened again once the store's packs were merged: `generation(repo)` moves on
    (service/store_packer.py), and the old handle lets go of the packs that were deleted, which
    libgit2 keeps open and mapped in every handle that read them. A thread takes its handle at
    the start of each piece of work, so no work sees it change under it.

    A handle let go is closed (`free()`: libgit2's odb, its packs and their indexes) as soon as
    nobody holds it, not when it is collected: a pygit2 Repository is a reference cycle (its
    branches, references, remotes and submodules refer back to it), freed only by a full
    collection, which the worker makes rare (service/heap.py). `let_go(repo)`, called by the
    packer once the generation moved, retires every thread's stale handle at once, idle threads'
    included (a pool thread with no work, the warmer waiting), and closes those nobody holds; one
    a thread's work in flight holds is closed at that thread's next `get`, the next `let_go` or
    the thread's end, whichever comes first; so is every handle of a thread that ends."""

    def __init__(self, store_path: Callable[[str], Path], generation: Callable[[str], int]) -> None:
        self.store_path, self.generation = store_path, generation
        self._local = threading.local()
        # every live thread's handles (freed with its thread-local when it ends), so that let_go
        # reaches threads that are not working; the lock orders a thread's get against let_go: a
        # handle is never recorded under a generation that let_go already passed
        self._maps: weakref.WeakSet[_Handles] = weakref.WeakSet()
        self._lock = threading.Lock()

    def get(self, repo: str) -> pygit2.Repository:
        mine = self._local.__dict__.get("handles")
        with self._lock:
            if mine is None:
                mine = self._local.handles = _Handles()
                self._maps.add(mine)
            generation = self.generation(repo)
            held = mine.by_repo.get(repo)
            if held is None or held.generation != generation:
                if held is not None:
                    mine.retired.append(held)
                held = mine.by_repo[repo] = _Handle(self.store_path(repo), generation)
            if mine.retired:
                mine.close_idle()
            return held.repo

    def let_go(self, repo: str) -> None:
        """Retire every thread's handle on `repo` opened at an older generation; close those that
        nobody holds."""
        with self._lock:
            generation = self.generation(repo)
            for mine in list(self._maps):
                held = mine.by_repo.get(repo)
                if held is not None and held.generation != generation:
                    mine.retired.append(mine.by_repo.pop(repo))
                mine.close_idle()


class _Handle:
    """A handle on a store, with the generation it was opened at and its reference count when
    only this object holds it (pygit2's own cycle included): more, and someone is using it."""

    def __init__(self, path: Path, generation: int) -> None:
        self.repo = open_store(path)
        self.generation = generation
        self.idle_refs = sys.getrefcount(self.repo)

    def close_if_idle(self) -> bool:
        """Close the handle when nobody else holds it (no frame, no pygit2 object read through
        it): nobody can use it after, so no thread's work loses it under it."""
        if sys.getrefcount(self.repo) > self.idle_refs:
            return False
        self.repo.free()
        return True


class _Handles:
    """One thread's handles (ThreadHandles holds it weakly; a dict cannot be): the current ones
    by repository, and those retired but still held. A thread that ends closes them all."""

    def __init__(self) -> None:
        self.by_repo: dict[str, _Handle] = {}
        self.retired: list[_Handle] = []
        weakref.finalize(self, _close_all, self.by_repo, self.retired)

    def close_idle(self) -> None:
        self.retired[:] = [h for h in self.retired if not h.close_if_idle()]


def _close_all(by_repo: dict[str, _Handle], retired: list[_Handle]) -> None:
    for held in [*by_repo.values(), *retired]:
        held.close_if_idle()


def trunk(repo: pygit2.Repository) -> str:
    return str(repo.references[TRUNK_REF].target)


def commit_of(repo: pygit2.Repository, commit_id: str) -> pygit2.Commit:
    """The commit, or not_found."""
    try:
        obj = repo.get(commit_id)
    except ValueError:
        obj = None
    if not isinstance(obj, pygit2.Commit):
        raise LoncaError("not_found", f"no commit {commit_id} in this repository")
    return obj


def policy_text(repo: pygit2.Repository, commit_id: str, name: str = "lonca.toml") -> str | None:
    """The lonca.toml (or policy.cedar) of a commit (a regular file at the top), None when there is none."""
    try:
        commit = repo.get(commit_id)
        blob = repo[commit.tree[name].id]
    except (KeyError, ValueError, AttributeError, TypeError):
        return None
    return blob.data.decode("utf-8", "replace") if isinstance(blob, pygit2.Blob) else None


def walk_tree(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = ""):
    """(path, oid, filemode) of every file below a tree, submodules included."""
    for e in tree:
        if e.filemode == pygit2.GIT_FILEMODE_TREE:
            yield from walk_tree(repo, repo[e.id], prefix + e.name + "/")
        else:
            yield prefix + e.name, e.id, e.filemode


def file_entry(repo: pygit2.Repository, path: str, oid, filemode: int) -> dict:
    """The seed's tree entry: path, mode, blob, size (0 for a submodule). The size comes from
    the object's header: the blob is not read (it was 94 % of `tree` at 100 000 files)."""
    if filemode == pygit2.GIT_FILEMODE_COMMIT:
        return {"path": path, "mode": "submodule", "blob": str(oid), "size": 0}
    return {"path": path, "mode": mode_name(filemode), "blob": str(oid), "size": repo.odb.read_header(oid)[1]}


def list_tree(repo: pygit2.Repository, commit_id: str) -> list[dict]:
    """Every file of the commit: path, mode, blob, size; sorted by path."""
    out = [file_entry(repo, p, oid, m) for p, oid, m in walk_tree(repo, commit_of(repo, commit_id).tree)]
    out.sort(key=lambda f: f["path"])
    return out


def with_contents(repo: pygit2.Repository, files: list[dict], redacted: frozenset[str] = frozenset()) -> list[dict]:
    """content_b64 of each file: null for a submodule and for a blob a human redacted (seed: tree, blobs)."""
    for f in files:
        gone = f["mode"] == "submodule" or f["blob"] in redacted
        f["content_b64"] = None if gone else base64.b64encode(repo[f["blob"]].data).decode()
    return files


def b64_size(n: int) -> int:
    return -(-n // 3) * 4


# -- the lock file of trunk's ref ----------------------------------------------------------------
# libgit2 (and git) update a ref by writing `<ref>.lock` and renaming it over the ref. A process
# killed in between leaves the lock behind, and every later update of the ref fails. A lock that
# no process holds open and that is older than `LOCK_GRACE_S` (at start: than the worker) is such
# a leftover and is removed.

def trunk_lock(path: Path) -> Path:
    return path / (TRUNK_REF + ".lock")


def clear_stale_trunk_lock(path: Path, older_than: float | None = None) -> bool:
    """Remove a leftover lock of trunk's ref in the store at `path`; True when trunk's ref can be
    updated now (no lock, or a stale one removed), False while a live process holds it."""
    lock = trunk_lock(path)
    try:
        mtime = lock.stat().st_mtime
    except FileNotFoundError:
        return True
    limit = older_than if older_than is not None else time.time() - LOCK_GRACE_S
    if mtime >= limit or _held_open(lock):
        return False
    lock.unlink(missing_ok=True)
    log.warning("removed a stale lock of trunk's ref, %s, left by a process that ended while updating it", lock)
    return True


def _held_open(path: Path) -> bool:
    """Whether any process we can see has `path` open (/proc/<pid>/fd)."""
    target = str(path.resolve())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def move_trunk(repo: pygit2.Repository, path: Path, commit: str) -> None:
    """Point trunk's ref at `commit`, removing a stale lock of it first; GitError when a live
    process holds the lock."""
    clear_stale_trunk_lock(path)
    repo.references.create(TRUNK_REF, pygit2.Oid(hex=commit), force=True)
