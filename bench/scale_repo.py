"""A deterministic generated repository of N Python files, written as git objects with pygit2
(no checkout, no `git add`), and one-function edits of it.

File i sits at `pkgAAA/subBB/mI.py` (at most 100 files a folder, 100 folders a package): three
functions and a class whose names it shares with its neighbours (`f{i}_a` calls `f{i-1}_a`,
every class has `run`), so that a renamed or re-signed name has files that mention it.
"""
from __future__ import annotations

from pathlib import Path

import pygit2
from pygit2.enums import FileMode

SIG = pygit2.Signature("Bench", "bench@lonca.invalid", 1_700_000_000, 0)


def path_of(i: int) -> str:
    return f"pkg{i // 10_000:03d}/sub{i // 100 % 100:02d}/m{i}.py"


def source(i: int, version: int = 0) -> bytes:
    """File i's text; `version` changes the body of one function (`f{i}_b`) and nothing else."""
    prev = max(i - 1, 0)
    return (f'"""Module {i}."""\n'
            f"from .m{prev} import f{prev}_a\n\n\n"
            f"def f{i}_a(x):\n    return f{prev}_a(x) + {i}\n\n\n"
            f"def f{i}_b(x, y):\n    total = x * y\n    return total + {version}\n\n\n"
            f"def helper(value):\n    return str(value)\n\n\n"
            f"class C{i}:\n    def run(self):\n        return f{i}_a(1)\n\n"
            f"    def stop(self):\n        return helper(self)\n").encode()


def build(path: Path, n: int) -> pygit2.Repository:
    """A bare repository at `path` whose `refs/heads/main` holds files 0..n-1."""
    repo = pygit2.init_repository(str(path), bare=True)
    folders: dict[str, pygit2.TreeBuilder] = {}
    for i in range(n):
        folder, name = path_of(i).rsplit("/", 1)
        tb = folders.get(folder)
        if tb is None:
            tb = folders[folder] = repo.TreeBuilder()
        tb.insert(name, repo.create_blob(source(i)), FileMode.BLOB)
    packages: dict[str, pygit2.TreeBuilder] = {}
    for folder, tb in folders.items():
        pkg, sub = folder.split("/")
        packages.setdefault(pkg, repo.TreeBuilder()).insert(sub, tb.write(), FileMode.TREE)
    root = repo.TreeBuilder()
    for pkg, tb in packages.items():
        root.insert(pkg, tb.write(), FileMode.TREE)
    repo.create_commit("refs/heads/main", SIG, SIG, f"{n} generated files\n", root.write(), [])
    return repo


def commit_edits(repo: pygit2.Repository, parent: str, edits: dict[str, bytes | None],
                 message: str = "edit\n") -> str:
    """A commit on `parent` with `edits` (path -> bytes, None to delete), refs untouched."""
    index = pygit2.Index()
    index.read_tree(repo.get(parent).tree)
    for p, data in edits.items():
        if data is None:
            index.remove(p)
        else:
            index.add(pygit2.IndexEntry(p, repo.create_blob(data), FileMode.BLOB))
    return str(repo.create_commit(None, SIG, SIG, message, index.write_tree(repo), [pygit2.Oid(hex=parent)]))
