"""tree_diff.file_changes against libgit2's own tree diff, on random trees where files and
folders come and go, modes change and a file gives way to a folder."""
import random

import pygit2

from lonca.queue.tree_diff import file_changes


def git_changes(repo, a, b) -> dict:
    out = {}
    for d in repo.diff(a, b).deltas:
        if d.status != pygit2.enums.DeltaStatus.ADDED:
            out.setdefault(d.old_file.path, [None, None])[0] = (d.old_file.id, d.old_file.mode)
        if d.status != pygit2.enums.DeltaStatus.DELETED:
            out.setdefault(d.new_file.path, [None, None])[1] = (d.new_file.id, d.new_file.mode)
    return {p: tuple(v) for p, v in out.items()}


def test_file_changes_are_libgit2s(tmp_path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    rnd = random.Random(5)
    index = pygit2.Index()
    trees = [repo[index.write_tree(repo)]]
    for _ in range(150):
        for _ in range(rnd.randrange(1, 4)):
            path = "/".join(rnd.choice("abc") for _ in range(rnd.randrange(1, 4)))
            if rnd.random() < 0.3 and len(index):
                index.remove(rnd.choice([e.path for e in index]))
            else:
                for e in list(index):     # a file gives way to a folder and the other way round
                    if e.path.startswith(path + "/") or path.startswith(e.path + "/"):
                        index.remove(e.path)
                mode = rnd.choice([pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE])
                index.add(pygit2.IndexEntry(path, repo.create_blob(str(rnd.randrange(4)).encode()), mode))
        trees.append(repo[index.write_tree(repo)])
    for _ in range(300):
        a, b = rnd.choice(trees), rnd.choice(trees)
        ours = {p: (None if x is None else (x.id, x.filemode), None if y is None else (y.id, y.filemode))
                for p, x, y in file_changes(repo, a, b)}
        assert ours == git_changes(repo, a, b)
