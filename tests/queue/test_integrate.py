"""Integration commits, and the quick tree path against libgit2's merge on the same input."""
from __future__ import annotations

import random

import pygit2
from pygit2.enums import FileMode

from lonca.queue import integrate, merge_trees
from lonca.queue.merge import _apply_one_side

from queue_git import SIG, commit, files_of, write_tree


def test_base_is_trunk_takes_the_change_tree(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    trunk = commit(repo, {"a.py": b"x = 1\n"}, [])
    change = commit(repo, {"a.py": b"x = 2\n"}, [trunk])
    out = integrate(repo, trunk, change, trunk, "integrate\n", SIG)
    c = repo[out.commit]
    assert c.tree_id == repo[change].tree_id
    assert [str(p) for p in c.parent_ids] == [str(trunk)] and c.message == "integrate\n"
    assert out.conflicts == [] and list(repo.references) == []


def test_behind_trunk_merges_and_reports_conflicts(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    base = commit(repo, {"a.py": b"def f():\n    return 1\n", "b.txt": b"b\n"}, [])
    trunk = commit(repo, {"a.py": b"def f():\n    return 2\n", "b.txt": b"b\n"}, [base])
    good = commit(repo, {"a.py": b"def f():\n    return 1\n", "b.txt": b"B\n"}, [base])
    bad = commit(repo, {"a.py": b"def f():\n    return 3\n", "b.txt": b"b\n"}, [base])
    ok = integrate(repo, trunk, good, base, "m\n", SIG)
    assert files_of(repo, ok.commit) == {"a.py": b"def f():\n    return 2\n", "b.txt": b"B\n"}
    no = integrate(repo, trunk, bad, base, "m\n", SIG)
    assert no.commit is None and no.tree is None and no.conflicts == ["a.py#f"]


def test_quick_path_handles_folders_and_falls_back(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    base = write_tree(repo, {"d/x.txt": b"x\n", "gone/only.txt": b"o\n", "f": b"file\n"})
    ours = write_tree(repo, {"d/x.txt": b"x2\n", "gone/only.txt": b"o\n", "f": b"file\n"})
    theirs = write_tree(repo, {"d/x.txt": b"x\n", "new/deep/n.txt": b"n\n", "f": b"file\n"})
    t = repo[base].peel(pygit2.Tree)
    quick = _apply_one_side(repo, t, repo[ours], repo[theirs])
    assert quick is not None
    assert files_of(repo, quick) == {"d/x.txt": b"x2\n", "new/deep/n.txt": b"n\n", "f": b"file\n"}
    # trunk turned `f` into a folder where the change edits the file: not for the quick path
    ours2 = write_tree(repo, {"d/x.txt": b"x\n", "gone/only.txt": b"o\n", "f/inner": b"i\n"})
    theirs2 = write_tree(repo, {"d/x.txt": b"x\n", "gone/only.txt": b"o\n", "f": b"file 2\n"})
    assert _apply_one_side(repo, t, repo[ours2], repo[theirs2]) is None
    result = merge_trees(repo, base, ours2, theirs2)
    assert result.tree is None and result.conflicts


def test_quick_path_agrees_with_libgit2(tmp_path):
    """Random one-sided edits of many files: the result equals libgit2's merge."""
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    rng = random.Random(5)
    files = {f"d{i % 7}/s{i % 3}/f{i}.txt": f"{i}\n".encode() for i in range(200)}
    base = write_tree(repo, files)
    for _ in range(20):
        paths = sorted(files)
        rng.shuffle(paths)
        mine, other = paths[:10], paths[10:20]
        ours = dict(files)
        for p in mine:
            ours[p] = b"ours\n"
        ours["trunk/new.txt"] = b"t\n"
        theirs = dict(files)
        for p in other[:5]:
            theirs[p] = b"theirs\n"
        for p in other[5:]:
            del theirs[p]
        theirs[f"added/{rng.randrange(1000)}.txt"] = b"a\n"
        to, tt = write_tree(repo, ours), write_tree(repo, theirs)
        expected = repo.merge_trees(base, to, tt)
        assert not expected.conflicts
        got = merge_trees(repo, base, to, tt)
        assert got.tree == str(expected.write_tree(repo)) and got.merged_paths == []


def test_executable_bit_from_one_side_is_kept(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    blob = repo.create_blob(b"#!/bin/sh\n")

    def tree(mode, extra=b""):
        idx = pygit2.Index()
        idx.add(pygit2.IndexEntry("run.sh", blob, mode))
        idx.add(pygit2.IndexEntry("other", repo.create_blob(b"o\n" + extra), FileMode.BLOB))
        return idx.write_tree(repo)
    base, ours, theirs = tree(FileMode.BLOB), tree(FileMode.BLOB, b"more\n"), tree(FileMode.BLOB_EXECUTABLE)
    out = merge_trees(repo, base, ours, theirs)
    assert repo[out.tree]["run.sh"].filemode == FileMode.BLOB_EXECUTABLE
    assert repo[out.tree]["other"].data == b"o\nmore\n"
