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


def test_a_map_made_flat_off_the_loop_raises_the_sizes_bound(tmp_path):
    """A trunk that grows through maps made on the loop (TreeMaps.near) and flattened on a thread:
    the bound follows the flat copy's files, not the first whole walk's."""
    import asyncio

    from lonca.service.change_build import TreeOverlay

    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    sig = pygit2.Signature("t", "t@example.com", 0, 0)
    index, parents, commits = pygit2.Index(), [], []
    for n in range(9):      # 10 files, then 250 more in each of 8 commits: 2,010
        for f in range(10 if n == 0 else 250):
            index.add(pygit2.IndexEntry(f"d{n}/f{f}.py", repo.create_blob(f"x = {n}, {f}\n".encode()),
                                        pygit2.GIT_FILEMODE_BLOB))
        c = repo.create_commit(None, sig, sig, "m", index.write_tree(repo), parents)
        parents = [c]
        commits.append(str(c))
    maps = TreeMaps(flat_at=8 * 250)    # the last is due to be made flat
    maps.get(repo, commits[0])      # a whole walk of 10 files

    async def grow() -> None:
        for c in commits[1:]:
            assert maps.near(repo, c) is not None
        for _ in range(500):        # the flat copy of the last, due, on a thread
            if not isinstance(maps.held(commits[-1]), TreeOverlay):
                return
            await asyncio.sleep(0.002)
    asyncio.run(grow())
    m = maps.held(commits[-1])
    assert isinstance(m, dict) and len(m) == 2010
    for p in m:
        maps.entry(repo, p, m[p])
    assert len(maps._sizes) == 2010     # twice the flat copy's files bound it; 1,024 if only the walk counted
