"""A preview writes nothing (change_build.planned_map): the map it judges is the one the commit
build_commit writes would have, and it refuses what build_commit refuses, with the same words.
Random changes on random trees, where files give way to folders and folders to files."""
import random

import pygit2
import pytest

from lonca.protocol import LoncaError
from lonca.service.change_build import build_commit, planned_map, tree_map

SIG = pygit2.Signature("a", "b", 0, 0)
NAMES = ["a", "b", "B", "c.py", "d.md"]


def _path(rnd: random.Random) -> str:
    return "/".join(rnd.choice(NAMES) for _ in range(rnd.randrange(1, 4)))


def _base(repo: pygit2.Repository, rnd: random.Random) -> str:
    index = pygit2.Index()
    for _ in range(rnd.randrange(3, 15)):
        path = _path(rnd)
        mode = rnd.choice([pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE, pygit2.GIT_FILEMODE_LINK])
        data = b"c.py" if mode == pygit2.GIT_FILEMODE_LINK else f"def f():\n    return {rnd.random()}\n".encode()
        try:
            index.add(pygit2.IndexEntry(path, repo.create_blob(data), mode))
        except (pygit2.GitError, ValueError):   # a file where the index holds a folder, or the other way
            continue
    return str(repo.create_commit(None, SIG, SIG, "base", index.write_tree(repo), []))


def _change(rnd: random.Random, base_paths: list[str]) -> list[dict]:
    files: dict[str, dict] = {}
    for _ in range(rnd.randrange(1, 5)):
        if base_paths and rnd.random() < 0.3:
            path = rnd.choice(base_paths)
            files[path] = {"path": path, "data": None, "mode": None}
            continue
        path = rnd.choice(base_paths) if base_paths and rnd.random() < 0.4 else _path(rnd)
        mode = rnd.choice([None, None, "regular", "executable", "symlink"])
        data = rnd.choice([b"../x", b"c.py", b"a/b"]) if mode == "symlink" else \
            rnd.choice([b"def f():\n    return 1\n", f"def g(x):\n    return {rnd.random()}\n".encode()])
        files[path] = {"path": path, "data": data, "mode": mode}
    return list(files.values())


def _outcome(fn):
    try:
        return "ok", fn()
    except LoncaError as e:
        return "refused", (e.code, e.message)


@pytest.mark.parametrize("case_twins", [True, False])
def test_a_previews_map_is_the_map_of_the_commit_a_proposal_writes(tmp_path, case_twins):
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    rnd = random.Random(7 if case_twins else 8)
    kinds = {"ok": 0, "refused": 0}
    for _ in range(300):
        base = _base(repo, rnd)
        base_map = tree_map(repo, repo[base].tree)
        files = _change(rnd, sorted(base_map))
        planned = _outcome(lambda: planned_map(repo, base, files, base_map, case_twins))
        built = _outcome(lambda: build_commit(repo, base, files, "m", "agent", 0, base_map, case_twins))
        assert planned[0] == built[0], (files, planned, built)
        kinds[planned[0]] += 1
        if planned[0] == "refused":
            assert planned[1] == built[1]
            continue
        (new_map, blobs), (commit, built_map) = planned[1], built[1]
        assert dict(new_map.items()) == dict(built_map.items()) == tree_map(repo, repo[commit].tree), files
        for oid, data in blobs.items():     # the bytes of every new blob, by the id git gives them
            assert repo[oid].data == data
    assert kinds["ok"] > 100 and kinds["refused"] > 50, kinds
