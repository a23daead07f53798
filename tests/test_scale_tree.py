"""`tree` answers sizes from object headers and paths from the worker's tree maps, made from the
parent's after a trunk move: the same answer as the blobs themselves, before and after."""
import base64

import pygit2
import pytest

from helpers import acquire, propose
from test_leases import APP, wait_status


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def check_tree(c, token: str, commit: str, store: pygit2.Repository) -> list[dict]:
    files = c.call("tree", {"commit": commit, "with_content": True}, token=token)
    assert [f["path"] for f in files] == sorted(f["path"] for f in files)
    for f in files:
        data = base64.b64decode(f["content_b64"])
        assert f["size"] == len(data) == len(store[f["blob"]].data), f["path"]
    walked = []

    def walk(tree, prefix):
        for e in tree:
            if e.filemode == pygit2.GIT_FILEMODE_TREE:
                walk(store[e.id], prefix + e.name + "/")
            else:
                walked.append(prefix + e.name)
    walk(store[commit].tree, "")
    assert sorted(walked) == [f["path"] for f in files]
    return files


def test_tree_sizes_are_the_blob_sizes_before_and_after_a_trunk_move(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent("a")["token"]
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))
    base = env.status()["trunk"]
    before = check_tree(c, agent, base, store)
    acquire(c, agent, "app.py#charge", {"symbol": "docs/new/guide.py#<file>", "kind": "edit"},
            {"symbol": "lib/util.py#<file>", "kind": "edit"})
    change = propose(c, agent, base, {"app.py": APP.replace("amount * 2", "amount * 3" + " " * 70),
                                      "docs/new/guide.py": "def guide():\n    return 'x' * 9\n",
                                      "lib/util.py": None})
    wait_status(c, agent, change["change"], "integrated")
    after = check_tree(c, agent, env.status()["trunk"], store)
    assert {f["path"] for f in after} == {f["path"] for f in before} - {"lib/util.py"} | {"docs/new/guide.py"}
    one = c.call("tree", {"commit": env.status()["trunk"], "paths": ["app.py", "nowhere.py"]}, token=agent)
    assert [(f["path"], f["size"]) for f in one] == [(f["path"], f["size"]) for f in after if f["path"] == "app.py"]


def test_tree_maps_made_from_an_ancestor_are_the_walked_ones(tmp_path):
    import random

    from lonca.service.change_build import TreeMaps, tree_changes, tree_map
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    sig = pygit2.Signature("a", "b", 0, 0)
    rnd = random.Random(2)
    index = pygit2.Index()
    commit = str(repo.create_commit(None, sig, sig, "m", index.write_tree(repo), []))
    maps = TreeMaps()
    maps.get(repo, commit)
    for step in range(120):
        before = repo[commit].tree
        for _ in range(3):      # files and folders come and go, a file gives way to a folder
            path = "/".join(rnd.choice("abcd") for _ in range(rnd.randrange(1, 4))) + rnd.choice([".py", ""])
            if rnd.random() < 0.3 and len(index):
                index.remove(rnd.choice([e.path for e in index]))
            else:
                index.add(pygit2.IndexEntry(path, repo.create_blob(str(rnd.random()).encode()), pygit2.GIT_FILEMODE_BLOB))
        commit = str(repo.create_commit(None, sig, sig, "m", index.write_tree(repo), [pygit2.Oid(hex=commit)]))
        walked = tree_map(repo, repo[commit].tree)
        changes = tree_changes(repo, before, repo[commit].tree)
        assert {p for p, e in changes.items() if e is not None} <= set(walked)
        if step % 5 == 0:       # the commits between were never asked about
            assert maps.get(repo, commit) == walked


def test_whole_tree_answers_rendered_from_an_ancestor_are_the_listed_ones(tmp_path):
    """The manifest kept as JSON (tree_manifest), made from an ancestor's: the same as the entries
    listed from the commit itself, as the wire encodes them, with paths JSON must escape."""
    import json
    import random

    from lonca.service import gitstore
    from lonca.service.change_build import TreeMaps
    from lonca.service.tree_manifest import Manifests
    from lonca.service.wire_json import dumps
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    sig = pygit2.Signature("a", "b", 0, 0)
    rnd = random.Random(3)
    index = pygit2.Index()
    commit = str(repo.create_commit(None, sig, sig, "m", index.write_tree(repo), []))
    manifests = Manifests(TreeMaps())
    names = ["a", "b", 'q"uote', "back\\slash", "é", "t\tab", "Z"]
    for step in range(80):
        for _ in range(3):
            path = "/".join(rnd.choice(names) for _ in range(rnd.randrange(1, 4)))
            if rnd.random() < 0.3 and len(index):
                index.remove(rnd.choice([e.path for e in index]))
            else:
                mode = rnd.choice([pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE])
                index.add(pygit2.IndexEntry(path, repo.create_blob(str(rnd.random()).encode() * rnd.randrange(5)), mode))
        commit = str(repo.create_commit(None, sig, sig, "m", index.write_tree(repo), [pygit2.Oid(hex=commit)]))
        if step % 3 == 0:       # the commits between were never asked about
            listed = [{**f, "content_b64": None} for f in gitstore.list_tree(repo, commit)]
            answer = dumps({"id": 7, "ok": True, "result": manifests.whole(repo, commit)})
            assert json.loads(answer) == {"id": 7, "ok": True, "result": listed}
            assert answer == dumps({"id": 7, "ok": True, "result": listed})
