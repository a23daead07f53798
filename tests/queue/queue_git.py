"""Real pygit2 repositories for the queue tests."""
from __future__ import annotations

import pygit2
from pygit2.enums import FileMode

SIG = pygit2.Signature("Test", "test@lonca.invalid", 1_700_000_000, 0)


def write_tree(repo: pygit2.Repository, files: dict[str, bytes]) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    return index.write_tree(repo)


def commit(repo: pygit2.Repository, files: dict[str, bytes], parents: list, message: str = "c") -> pygit2.Oid:
    return repo.create_commit(None, SIG, SIG, message, write_tree(repo, files), list(parents))


def files_of(repo: pygit2.Repository, rev) -> dict[str, bytes]:
    out = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for e in tree:
            if e.filemode == FileMode.TREE:
                walk(repo[e.id], prefix + e.name + "/")
            else:
                out[prefix + e.name] = repo[e.id].data
    walk(repo[rev].peel(pygit2.Tree), "")
    return out
