"""Writing a candidate tree out as plain files, for checks to run in.

Written from the object store entry by entry rather than with libgit2's checkout: the stores
are bare, and no index, ref or `.git` of the store should be reachable from a check's cwd.
"""
from __future__ import annotations

import os
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

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
