"""TreeMaps.near (a preview's base map made on the event loop from a held ancestor's and the
trees' difference) is the map a whole walk of the commit's tree gives, or None where the loop
must leave it to a thread: no held map within _ANCESTORS first-parent ancestors, more than _NEAR_FILES files of
difference, or a held map due to be made flat (its flat copy made on a thread is on its way).
An overlay on an overlay is one layer on the flat map below (TreeOverlay)."""
import asyncio

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lonca.service.change_build import _ANCESTORS, _NEAR_FILES, TreeMaps, TreeOverlay, tree_map

SIG = pygit2.Signature("a", "b", 0, 0)
# files and folders come and go; a file gives way to a folder of the same name and back
PATH = st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map("/".join)
OP = st.tuples(st.sampled_from(["write", "write", "delete", "executable"]), PATH, st.integers(0, 9))
STEP = st.tuples(st.lists(OP, min_size=0, max_size=4), st.booleans())    # a commit's ops; its map held


def _chain(repo, steps) -> list[str]:
    index = pygit2.Index()
    commits = [str(repo.create_commit(None, SIG, SIG, "m", index.write_tree(repo), []))]
    for ops, _ in steps:
        for kind, path, v in ops:
            if kind == "delete":
                for e in [e for e in index if e.path == path or e.path.startswith(path + "/")]:
                    index.remove(e.path)
                continue
            for e in [e for e in index if e.path.startswith(path + "/")]:   # a folder gives way to the file
                index.remove(e.path)
            parts = path.split("/")
            for i in range(1, len(parts)):                                   # a file to the folder
                if "/".join(parts[:i]) in index:
                    index.remove("/".join(parts[:i]))
            mode = pygit2.GIT_FILEMODE_BLOB_EXECUTABLE if kind == "executable" else pygit2.GIT_FILEMODE_BLOB
            index.add(pygit2.IndexEntry(path, repo.create_blob(b"%d" % v), mode))
        commits.append(str(repo.create_commit(None, SIG, SIG, "m", index.write_tree(repo),
                                              [pygit2.Oid(hex=commits[-1])])))
    return commits


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=14), wait=st.booleans())
def test_a_map_made_near_is_the_walked_one(tmp_path_factory, steps, wait):
    """`wait`: for each flat copy begun on a thread before the next commit is asked about, or not."""
    repo = pygit2.init_repository(str(tmp_path_factory.mktemp("s") / "s.git"), bare=True)
    commits = _chain(repo, steps)
    maps = TreeMaps(size=64, flat_at=3)     # a few changed paths: flat copies are made often
    maps.get(repo, commits[0])
    for commit, (_, held) in zip(commits[1:], steps):
        if held:
            maps.get(repo, commit)

    made = set()    # the commits whose map near made

    async def ask() -> None:
        for at, commit in enumerate(commits):   # oldest first: each one made near stacks on the last
            asked = maps.held(commit) is None
            m = maps.near(repo, commit)
            back = next((k for k in range(1, _ANCESTORS + 1)
                         if at - k >= 0 and maps.held(commits[at - k]) is not None), None)
            if m is None:
                # only where the loop must not make it: nothing held near, or a map due to be made flat
                assert back is None or due(maps, maps.held(commits[at - back])), (at, back)
                continue
            walked = tree_map(repo, repo[commit].tree)
            assert dict(m.items()) == walked and sorted(m) == sorted(walked)
            assert not isinstance(m, TreeOverlay) or not isinstance(m.base, TreeOverlay)    # one layer
            # kept (or its flat copy already): the next preview and the threads' get find it
            assert maps.held(commit) in (m, walked)
            if asked:
                made.add(commit)
            if wait:
                await _flat(maps, commit)
    asyncio.run(ask())      # its end waits for the flat copies
    for commit in commits:
        m = maps.held(commit)
        assert m is None or dict(m.items()) == tree_map(repo, repo[commit].tree)
        if commit in made:      # made flat where it was due
            assert not due(maps, m)
    assert maps.get(repo, commits[-1]) == tree_map(repo, repo[commits[-1]].tree)


def due(maps: TreeMaps, m) -> bool:
    return isinstance(m, TreeOverlay) and len(m.changes) >= maps.flat_at


async def _flat(maps: TreeMaps, commit: str) -> None:
    """Until the map held for `commit` is not due to be made flat (a thread is flattening it)."""
    for _ in range(500):
        if not due(maps, maps.held(commit)):
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the map due to be made flat was not made flat")


def test_every_trunk_of_a_long_run_is_made_near(tmp_path):
    """A trunk moved 30 times, each asked about: every map made on the loop (none left to a
    thread's walk by a flat copy due), as long as each flat copy is done before the next trunk's."""
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    commits = _chain(repo, [([("write", f"p{k % 5}/f", k)], False) for k in range(30)])
    maps = TreeMaps(flat_at=4)      # five paths change: a flat copy every few moves
    maps.get(repo, commits[0])

    async def ask() -> None:
        for commit in commits[1:]:
            assert maps.near(repo, commit) == tree_map(repo, repo[commit].tree)
            await _flat(maps, commit)
    asyncio.run(ask())


def test_a_large_change_or_a_far_ancestor_is_left_to_a_thread(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    big = [([("write", f"f{i}", 1) for i in range(_NEAR_FILES + 1)], False)]
    commits = _chain(repo, big + [([("write", "a", k)], False) for k in range(_ANCESTORS + 1)])
    maps = TreeMaps()
    maps.get(repo, commits[0])
    assert maps.near(repo, commits[1]) is None      # 257 files of difference: a thread walks them
    assert maps.near(repo, commits[-1]) is None     # the held one is _ANCESTORS + 1 back
    maps.get(repo, commits[1])
    assert maps.near(repo, commits[-2]) == tree_map(repo, repo[commits[-2]].tree)
    assert maps.near(repo, "0" * 40) is None and maps.near(repo, "not a commit") is None
