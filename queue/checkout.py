"""Writing a candidate tree out as plain files, for checks to run in.

Written from the object store entry by entry rather than with libgit2's checkout: the stores
are bare, and no index, ref or `.git` of the store should be reachable from a check's cwd.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from .tree_diff import file_changes

_BAD_NAMES = {"", ".", "..", ".git"}


def checkout_tree(repo: pygit2.Repository, tree_oid: pygit2.Oid | str, dest: Path) -> int:
    """Write the tree (or a commit's tree) under `dest`, which must be empty or absent.
    Submodules become empty folders. Returns the number of files written."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty")
    return _write(repo, repo[tree_oid].peel(pygit2.Tree), dest)


def _write(repo: pygit2.Repository, tree: pygit2.Tree, folder: Path) -> int:
    count = 0
    for entry in tree:
        if entry.name in _BAD_NAMES or "/" in entry.name or "\\" in entry.name:
            raise ValueError(f"tree entry {entry.name!r} can not be written")
        target = folder / entry.name
        mode = entry.filemode
        if mode == FileMode.TREE:
            target.mkdir()
            count += _write(repo, repo[entry.id], target)
        elif mode == FileMode.COMMIT:
            target.mkdir()
        elif mode == FileMode.LINK:
            os.symlink(repo[entry.id].data, target)
            count += 1
        else:
            target.write_bytes(repo[entry.id].data)
            if mode == FileMode.BLOB_EXECUTABLE:
                target.chmod(0o755)
            count += 1
    return count


SLOT_PREFIX = "lonca-slot-"


def slot_folder() -> Path:
    """A new folder in the temp dir for a runner slot's kept checkout, named for this process:
    `lonca-slot-<pid>-<random>`, so that a later worker can tell whose it was (sweep_slots)."""
    return Path(tempfile.mkdtemp(prefix=f"{SLOT_PREFIX}{os.getpid()}-"))


def sweep_slots(tmp: Path | None = None) -> list[Path]:
    """Remove the slot folders that a process killed without its shutdown (SIGKILL, a crash)
    left in the temp dir: those named for a pid no process holds now, and owned by this user
    (a folder of another user's worker, or of a live worker, is never touched; a pid reused by
    an unrelated process keeps its folder until that one ends too). Returns what was removed."""
    root = Path(tmp or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for e in entries:
        pid = e.name[len(SLOT_PREFIX):].split("-", 1)[0]
        if not e.name.startswith(SLOT_PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if not e.is_dir(follow_symlinks=False) or e.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        removed.append(Path(e.path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process
        pass
    return True


def _signature(st: os.stat_result) -> tuple[int, ...]:
    """What a write, a chmod, a rename over or a truncation changes: the inode, size, mode and
    times. ctime can not be set back from user space, so a file a check rewrote differs here,
    unless it rewrote it in the clock tick of our own write (see KeptCheckout: such files are
    compared by content)."""
    return (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)


class KeptCheckout:
    """A checkout kept between checks (one per runner slot) and brought to each candidate tree by
    writing only what differs, instead of every file of the tree each time.

    The check must still see exactly the candidate tree, whatever the last check left behind: so
    each update first scans the folder, without following links, against what was written last
    time. A file whose inode, size, mode or times moved, or that is missing, is written again; a
    file, link or folder nobody wrote (a build's output) is removed; a file written by the last
    update, whose times a check could have matched within one clock tick, is compared by
    content. Then the changes between the last tree and this one (tree_diff.file_changes: only
    subtrees whose ids differ are read) are applied, deletions first, every write replacing what
    is there rather than writing through it (a link planted by a check is never followed).
    Anything unexpected (an error while updating) falls back to a fresh checkout."""

    def __init__(self, root: Path) -> None:
        self.root = root                # the check's cwd; its parent holds nothing else of ours
        self.tree: str | None = None    # the tree it holds
        self._files: dict[str, tuple[pygit2.Oid, int, tuple[int, ...]]] = {}   # path -> (id, mode, signature)
        self._dirs: dict[str, int] = {}     # folders the tree makes, submodules' included -> st_mode
        self._fresh: set[str] = set()   # files written by the last update
        self._subs: set[str] = set()    # submodules' folders (kept empty)

    def update(self, repo: pygit2.Repository, tree_oid: pygit2.Oid | str) -> int:
        """Bring the checkout to `tree_oid` (a tree or a commit); the number of files written."""
        tree = repo[tree_oid].peel(pygit2.Tree)
        try:
            if self.tree is not None and self.root.is_dir():
                return self._apply(repo, tree)
        except (OSError, ValueError, KeyError):
            pass
        self._reset()
        return self._write_all(repo, tree)

    def _reset(self) -> None:
        if self.root.parent.exists():
            for child in self.root.parent.iterdir():    # a check may have written beside its cwd
                _remove(child)
        self.tree, self._files, self._dirs, self._fresh, self._subs = None, {}, {}, set(), set()

    def _write_all(self, repo: pygit2.Repository, tree: pygit2.Tree) -> int:
        checkout_tree(repo, tree.id, self.root)
        walked = [(path, entry) for path, entry in _walk(repo, tree, "")]
        for path, entry in walked:
            if entry.filemode in (FileMode.TREE, FileMode.COMMIT):
                self._dirs[path] = os.lstat(self.root / path).st_mode
                if entry.filemode == FileMode.COMMIT:
                    self._subs.add(path)
            else:
                self._files[path] = (entry.id, entry.filemode, _signature(os.lstat(self.root / path)))
        self._fresh = set(self._files)
        self.tree = str(tree.id)
        return len(self._files)

    def _apply(self, repo: pygit2.Repository, tree: pygit2.Tree) -> int:
        for child in self.root.parent.iterdir():
            if child != self.root:
                _remove(child)
        dirty = self._scan()
        old = repo[self.tree].peel(pygit2.Tree)
        writes: dict[str, pygit2.Object] = {}
        gone = list(dirty)
        for path, _, new in file_changes(repo, old, tree):
            if new is None:
                self._delete(path)
                gone.append(path)
            else:
                writes[path] = new
        for path in dirty:             # what a check changed: as the new tree has it, or not at all
            if path not in writes:
                try:
                    entry = tree[path]
                except KeyError:
                    continue
                if entry.filemode != FileMode.TREE:
                    writes[path] = entry
        for path in sorted(writes):
            self._write(repo, path, writes[path])
        self._prune(gone)
        self._fresh = {p for p, e in writes.items() if e.filemode != FileMode.COMMIT}
        self.tree = str(tree.id)
        return len(self._fresh)

    def _scan(self) -> set[str]:
        """Make the folder hold nothing but what was written and still is as written; returns
        the paths of the files and folders that had to go (changed, replaced or missing)."""
        seen: set[str] = set()
        todo = [""]
        while todo:
            folder = todo.pop()
            with os.scandir(self.root / folder) as it:
                entries = list(it)
            for e in entries:
                path = folder + e.name
                if e.is_dir(follow_symlinks=False):
                    if path in self._dirs:
                        if e.stat(follow_symlinks=False).st_mode != self._dirs[path]:
                            os.chmod(e.path, self._dirs[path] & 0o7777)     # a check's chmod, undone
                        seen.add(path)
                        todo.append(path + "/")
                        continue
                else:
                    kept = self._files.get(path)
                    if kept is not None and self._intact(path, e, kept):
                        seen.add(path)
                        continue
                _remove(Path(e.path))
        dirty = {p for p in self._files if p not in seen}
        for path in dirty:
            del self._files[path]
        dirty |= {d for d in self._dirs if d not in seen}     # a submodule's folder is written too
        self._dirs = {d: m for d, m in self._dirs.items() if d in seen}
        self._subs &= set(self._dirs)
        return dirty

    def _prune(self, gone: list[str]) -> None:
        """The folders above what went that hold nothing any more: a tree holds no empty folder
        (a submodule's aside)."""
        occupied: set[str] = set()
        for path in [*self._files, *self._subs]:
            while "/" in path:
                path = path.rpartition("/")[0]
                if path in occupied:
                    break
                occupied.add(path)
        above = {path[:i] for path in gone for i, ch in enumerate(path) if ch == "/"}
        for folder in sorted(above, key=len, reverse=True):    # the deepest first
            if folder in self._dirs and folder not in occupied and folder not in self._subs:
                _remove(self.root / folder)
                del self._dirs[folder]

    def _forget(self, prefix: str) -> None:
        """Everything recorded under a folder that is gone."""
        for p in [p for p in self._files if p.startswith(prefix)]:
            del self._files[p]
        self._dirs = {d: m for d, m in self._dirs.items() if not d.startswith(prefix)}
        self._subs = {d for d in self._subs if not d.startswith(prefix)}

    def _intact(self, path: str, e: os.DirEntry, kept: tuple[pygit2.Oid, int, tuple[int, ...]]) -> bool:
        oid, mode, signature = kept
        st = e.stat(follow_symlinks=False)
        if _signature(st) != signature:
            return False
        if path not in self._fresh:
            return True
        # written by the last update: a rewrite within the same clock tick keeps every time
        if mode == FileMode.LINK:
            return pygit2.hash(os.fsencode(os.readlink(e.path))) == oid
        return pygit2.hashfile(e.path) == oid

    def _delete(self, path: str) -> None:
        target = self.root / path
        if path in self._files or path in self._dirs:
            _remove(target)
            self._files.pop(path, None)
            self._forget(path + "/")
            self._dirs.pop(path, None)
            self._subs.discard(path)

    def _write(self, repo: pygit2.Repository, path: str, entry: pygit2.Object) -> None:
        parts = path.split("/")
        for name in parts:
            if name in _BAD_NAMES or "\\" in name:
                raise ValueError(f"tree entry {path!r} can not be written")
        folder = ""
        for name in parts[:-1]:     # parents: real folders of ours, whatever stood there
            folder += name
            if folder not in self._dirs:
                if folder in self._files:
                    self._files.pop(folder)
                _remove(self.root / folder)
                (self.root / folder).mkdir()
                self._dirs[folder] = os.lstat(self.root / folder).st_mode
            folder += "/"
        target = self.root / path
        if path in self._dirs:
            self._forget(path + "/")
            self._dirs.pop(path, None)
            self._subs.discard(path)
        _remove(target)
        mode = entry.filemode
        if mode == FileMode.COMMIT:
            target.mkdir()
            self._dirs[path] = os.lstat(target).st_mode
            self._subs.add(path)
            self._files.pop(path, None)
            return
        if mode == FileMode.LINK:
            os.symlink(repo[entry.id].data, target)
        else:
            target.write_bytes(repo[entry.id].data)
            if mode == FileMode.BLOB_EXECUTABLE:
                target.chmod(0o755)
        self._files[path] = (entry.id, mode, _signature(os.lstat(target)))


def _walk(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str):
    for entry in tree:
        path = prefix + entry.name
        yield path, entry
        if entry.filemode == FileMode.TREE:
            yield from _walk(repo, repo[entry.id], path + "/")


def _remove(path: Path) -> None:
    """Whatever is at `path` gone (a folder with all it holds; a link itself, never its target)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
