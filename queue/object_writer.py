"""Git objects written as loose files with the GIL let go while the file system makes each file.

pygit2's create_blob, create_commit and TreeBuilder.write hold the GIL through the whole of
libgit2's write, the new file's creation included. That is cheap on most file systems and dear
on this project's machines: ext4 without a journal (/ here) passes over every inode deleted in
the last minute (five while its inode table is not yet written back), one by one, before it
hands one to a new file (fs/ext4/ialloc.c, find_inode_bit and recently_deleted), and a packer's
prune, a test suite's or a bench's cleanup deletes thousands. A new file then cost about 1 ms of
kernel time, and each of the ~9 objects an integration writes (a proposal's blob, trees and
commit, then a merge's trees and commit) held every other thread, the event loop among them,
that long (docs/decisions.md, "Loose objects written with the GIL let go").

So an object is formatted here (a tree as git's canonical entries, a commit by libgit2's own
create_commit_string), hashed, compressed, and written with `os` calls, each of which lets the
GIL go: a temporary file in its fan-out folder, renamed into place, as libgit2 and git do. Not
fsynced, as libgit2 does not by default. The ids are libgit2's for the same objects
(tests/unit/test_object_writer.py)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import threading
import zlib
from typing import NamedTuple

import pygit2
from pygit2.enums import FileMode

TREE = int(FileMode.TREE)
_ENTRY = re.compile(rb"(\d+) ([^\0]*)\0.{20}", re.S)   # a tree's entry: octal mode, name, raw id
_LEVEL = 1      # zlib's, as libgit2's loose objects (Z_BEST_SPEED)
_KEPT_BYTES = 16 << 20     # the kept trees' entries, estimated: a byte bound, as a folder may hold 10,000 files
_ENTRY_BYTES = 120          # what a kept entry costs beyond its bytes: two bytes objects and a dict slot


def write_object(repo: pygit2.Repository, kind: bytes, data: bytes) -> pygit2.Oid:
    """The id of the object `kind` (b"blob", b"tree", b"commit") holding `data`, written as a
    loose file unless the store holds it already."""
    body = b"%s %d\0" % (kind, len(data)) + data
    oid = pygit2.Oid(raw=hashlib.sha1(body).digest())
    if oid in repo:
        return oid
    hexid = str(oid)
    folder = os.path.join(repo.path, "objects", hexid[:2])
    packed = zlib.compress(body, _LEVEL)
    tmp = os.path.join(folder, f"tmp_obj_lonca_{secrets.token_hex(8)}")    # no object's name: the packer skips it
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileNotFoundError:   # the store's first object in this fan-out folder
        os.makedirs(folder, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        try:
            view = memoryview(packed)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, hexid[2:]))    # a writer of the same object meanwhile wrote the same bytes
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return oid


def write_commit(repo: pygit2.Repository, author: pygit2.Signature, committer: pygit2.Signature, message: str,
                 tree: pygit2.Oid, parents: list[pygit2.Oid]) -> pygit2.Oid:
    """repo.create_commit(None, ...) written through write_object: libgit2 formats it."""
    return write_object(repo, b"commit", repo.create_commit_string(author, committer, message, tree, parents).encode())


class Entry(NamedTuple):
    id: pygit2.Oid
    filemode: int


class _Trees:
    """The entries of the trees last read or written, by id (a tree's id is its bytes): trunk's
    folders are edited by every proposal on it and by the merge that lands it, and reading and
    splitting one (about 0.1 ms for 100 files) was what a TreeWriter cost more than a TreeBuilder."""

    def __init__(self) -> None:
        self._kept: dict[bytes, tuple[dict[bytes, bytes], int]] = {}     # id -> (entries, their bytes)
        self._bytes = 0
        self._lock = threading.Lock()     # shared by the worker's threads

    def entries(self, tree: pygit2.Tree) -> dict[bytes, bytes]:
        with self._lock:
            kept = self._kept.get(tree.id.raw)
        if kept is None:
            entries = {m[2]: m[0] for m in _ENTRY.finditer(tree.read_raw())}
            self.keep(tree.id, entries)
            return dict(entries)
        return dict(kept[0])   # the caller's to edit

    def keep(self, oid: pygit2.Oid, entries: dict[bytes, bytes]) -> None:
        size = 2 * sum(map(len, entries.values())) + _ENTRY_BYTES * len(entries)
        with self._lock:
            old = self._kept.pop(oid.raw, None)
            if old is not None:
                self._bytes -= old[1]
            self._kept[oid.raw] = (entries, size)
            self._bytes += size
            while self._bytes > _KEPT_BYTES and self._kept:
                self._bytes -= self._kept.pop(next(iter(self._kept)))[1]


_TREES = _Trees()


class TreeWriter:
    """What pygit2's TreeBuilder is to the worker (get, insert, remove, len, write), written
    through write_object. Names are checked by the callers (service.paths, a superset of git's
    rules) or come from trees already written. Each entry is kept as its bytes in the tree, in
    the tree's order while no name is added: an edit of a file already there is a write with
    no sort (a folder of 100 files cost ~0.1 ms more of Python than libgit2's builder)."""

    __slots__ = ("repo", "_entries", "_ordered")

    def __init__(self, repo: pygit2.Repository, tree: pygit2.Tree | None = None) -> None:
        self.repo = repo
        # name (bytes, as git keeps it) -> the entry's bytes: octal mode, name, NUL, raw id
        self._entries: dict[bytes, bytes] = {} if tree is None else _TREES.entries(tree)
        self._ordered = True

    def get(self, name: str) -> Entry | None:
        e = self._entries.get(name.encode())
        return None if e is None else Entry(pygit2.Oid(raw=e[-20:]), int(e[:e.index(b" ")], 8))

    def insert(self, name: str, oid: pygit2.Oid, mode: int) -> None:
        key = name.encode()
        old = self._entries.get(key)
        if old is None or old.startswith(b"40000 ") != (mode == TREE):     # a new name, or a file made a folder
            self._ordered = False
        self._entries[key] = b"%o %s\0%s" % (mode, key, oid.raw)

    def remove(self, name: str) -> None:
        del self._entries[name.encode()]

    def __len__(self) -> int:
        return len(self._entries)

    def write(self) -> pygit2.Oid:
        """In git's order: by name, a folder's as if it ended with '/'."""
        if not self._ordered:
            self._entries = dict(sorted(self._entries.items(),
                                        key=lambda kv: kv[0] + b"/" if kv[1].startswith(b"40000 ") else kv[0]))
            self._ordered = True
        oid = write_object(self.repo, b"tree", b"".join(self._entries.values()))
        _TREES.keep(oid, self._entries)
        self._entries = dict(self._entries)     # what is kept is never edited
        return oid
