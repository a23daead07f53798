"""TreeMaps remembers blob sizes for what the trees it holds can name, not for every blob of
history: in a repository where each edit is a new blob, a fixed count (400,000) filled with old
versions (docs/decisions.md, "The soak's caches bounded by what the trees hold")."""
import pygit2

from lonca.service.change_build import TreeMaps


def test_blob_sizes_are_bounded_by_the_trees_held_not_by_history(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    sig = pygit2.Signature("t", "t@example.com", 0, 0)
    maps, parents, commits = TreeMaps(), [], []
    for n in range(80):     # 20 files, each a new blob in every commit: 1,600 blobs
        tb = repo.TreeBuilder()
        for f in range(20):
            tb.insert(f"f{f}.py", repo.create_blob(f"x = {n * 100 + f}\n".encode()), pygit2.GIT_FILEMODE_BLOB)
        c = repo.create_commit(None, sig, sig, "m", tb.write(), parents)
        parents = [c]
        commits.append(str(c))
    for c in commits:   # a `tree` answer of each commit in turn, as trunk moves
        m = maps.get(repo, c)
        sizes = {p: maps.entry(repo, p, m[p])["size"] for p in m}
        assert sizes == {p: repo[m[p].oid].size for p in m}
    assert len(maps._sizes) <= 1024   # _SIZES_MIN: 20 files need 40; all 1,600 were kept before
