"""A repository's bare store names trunk in its HEAD, so a plain `git clone <store>` (no `-b
main`) checks trunk out: stores made by repo.init (imported or empty) and by repo.restore, and a
store made before that (HEAD on git's default `master`) once the worker starts again. Real
workers, real stores, the real `git clone`."""
import subprocess
from pathlib import Path

import pytest

from conftest import git
from helpers import human_key, init_repo, login
from test_backup_restore import fresh_worker


@pytest.fixture
def database_url():
    return None  # the git store is what is tested


def clone_head(store: Path, into: Path) -> str:
    """The commit a plain clone of `store` checks out ('' when it checks out nothing)."""
    res = subprocess.run(["git", "clone", "-q", str(store), str(into)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    head = subprocess.run(["git", "-C", str(into), "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True, text=True, timeout=60)
    return head.stdout.strip()


def test_a_clone_of_a_new_store_checks_out_trunk(make_worker, source_repo, tmp_path, monkeypatch):
    w = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    key = human_key("alice")
    c = w.client().connect()
    init_repo(c, key, "demo", import_from=str(source_repo))
    token = login(c, key)
    init_repo(c, key, "empty")
    for repo in ("demo", "empty"):
        trunk = c.call("status", repo=repo, token=token)["trunk"]
        into = tmp_path / f"clone-{repo}"
        assert clone_head(w.home / "repos" / f"{repo}.git", into) == trunk
        assert git("symbolic-ref", "HEAD", cwd=into) == "refs/heads/main"
    assert (tmp_path / "clone-demo" / "app.py").read_text() == (source_repo / "app.py").read_text()

    # a store made before: HEAD on git's default branch, which a store never has
    store = w.home / "repos" / "demo.git"
    w.stop()
    git("symbolic-ref", "HEAD", "refs/heads/master", cwd=store)
    assert clone_head(store, tmp_path / "before") == ""  # the bug: a clone checks out nothing
    w.start()
    assert git("symbolic-ref", "HEAD", cwd=store) == "refs/heads/main"
    assert clone_head(store, tmp_path / "after") == c.call("status", repo="demo", token=token)["trunk"]
    c.close()

    # a restored store: from a bundle of the backup, on a worker with a home of its own
    c = w.client().connect()
    bundle = c.call("repo.backup", repo="demo", token=login(c, key))["path"]
    c.close()
    other = fresh_worker(tmp_path, "other", w.env["LONCA_HUMANS"], key_from=w.home / "daemon.key")
    try:
        oc = other.client().connect()
        restored = oc.call("repo.restore", {"repo": "demo", "from": bundle})
        trunk = oc.call("status", repo="demo", token=login(oc, key))["trunk"]
        assert clone_head(Path(restored["path"]), tmp_path / "restored") == trunk
        oc.close()
    finally:
        other.stop()

