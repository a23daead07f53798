"""One bare git store per repository, with pygit2: creating trunk, importing a branch, reading
trees and blobs."""
import base64
import shutil
from pathlib import Path

import pygit2

from lonca.protocol import LoncaError

TRUNK_REF = "refs/heads/main"
DAEMON_SIG = ("Lonca", "daemon@lonca.invalid")

_MODES = {
    pygit2.GIT_FILEMODE_BLOB: "regular",
    pygit2.GIT_FILEMODE_BLOB_EXECUTABLE: "executable",
    pygit2.GIT_FILEMODE_LINK: "symlink",
    pygit2.GIT_FILEMODE_COMMIT: "submodule",
}


def mode_name(filemode: int) -> str:
    return _MODES.get(filemode, "regular")


def create_empty(path: Path, now_ms: int) -> str:
    """A bare store whose trunk is one commit of the empty tree."""
    repo = pygit2.init_repository(str(path), bare=True)
    tree = repo.TreeBuilder().write()
    sig = pygit2.Signature(*DAEMON_SIG, now_ms // 1000, 0)
    oid = repo.create_commit(TRUNK_REF, sig, sig, "Lonca: empty trunk\n", tree, [])
    return str(oid)


def import_branch(path: Path, source: str, branch: str) -> str:
    """A bare store whose trunk is `branch` fetched from `source`; `git` on any failure."""
    repo = pygit2.init_repository(str(path), bare=True)
    try:
        remote = repo.remotes.create_anonymous(source)
        remote.fetch([f"+refs/heads/{branch}:{TRUNK_REF}"], depth=0)
    except (pygit2.GitError, KeyError, ValueError) as e:
        shutil.rmtree(path, ignore_errors=True)
        raise LoncaError("git", f"fetching {branch} from {source} failed: {e}") from None
    try:
        return str(repo.references[TRUNK_REF].target)
    except KeyError:
        shutil.rmtree(path, ignore_errors=True)
        raise LoncaError("git", f"{source} has no branch {branch}") from None


def open_store(path: Path) -> pygit2.Repository:
    return pygit2.Repository(str(path))


def trunk(repo: pygit2.Repository) -> str:
    return str(repo.references[TRUNK_REF].target)


def commit_of(repo: pygit2.Repository, commit_id: str) -> pygit2.Commit:
    """The commit, or not_found."""
    try:
        obj = repo.get(commit_id)
    except ValueError:
        obj = None
    if not isinstance(obj, pygit2.Commit):
        raise LoncaError("not_found", f"no commit {commit_id} in this repository")
    return obj


def walk_tree(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = ""):
    """(path, oid, filemode) of every file below a tree, submodules included."""
    for e in tree:
        if e.filemode == pygit2.GIT_FILEMODE_TREE:
            yield from walk_tree(repo, repo[e.id], prefix + e.name + "/")
        else:
            yield prefix + e.name, e.id, e.filemode


def file_entry(repo: pygit2.Repository, path: str, oid, filemode: int) -> dict:
    """The seed's tree entry: path, mode, blob, size (0 for a submodule). The size comes from
    the object's header: the blob is not read (it was 94 % of `tree` at 100 000 files)."""
    if filemode == pygit2.GIT_FILEMODE_COMMIT:
        return {"path": path, "mode": "submodule", "blob": str(oid), "size": 0}
    return {"path": path, "mode": mode_name(filemode), "blob": str(oid), "size": repo.odb.read_header(oid)[1]}


def list_tree(repo: pygit2.Repository, commit_id: str) -> list[dict]:
    """Every file of the commit: path, mode, blob, size; sorted by path."""
    out = [file_entry(repo, p, oid, m) for p, oid, m in walk_tree(repo, commit_of(repo, commit_id).tree)]
    out.sort(key=lambda f: f["path"])
    return out


def with_contents(repo: pygit2.Repository, files: list[dict]) -> list[dict]:
    for f in files:
        f["content_b64"] = None if f["mode"] == "submodule" else base64.b64encode(repo[f["blob"]].data).decode()
    return files


def b64_size(n: int) -> int:
    return -(-n // 3) * 4
