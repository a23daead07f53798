"""Building a proposal in the bare store (pygit2) and computing its facts (lonca.symbols)."""
import base64
import binascii
import secrets
import threading
from collections import OrderedDict

import pygit2

from lonca.protocol import LoncaError
from lonca.symbols import SymbolCache, TreeEntry, compute_facts

from .gitstore import DAEMON_SIG, commit_of, walk_tree
from .paths import check_path, check_symlink_target, check_tree

MODES = {"regular": pygit2.GIT_FILEMODE_BLOB, "executable": pygit2.GIT_FILEMODE_BLOB_EXECUTABLE,
         "symlink": pygit2.GIT_FILEMODE_LINK}
OCTAL = {pygit2.GIT_FILEMODE_BLOB: "100644", pygit2.GIT_FILEMODE_BLOB_EXECUTABLE: "100755",
         pygit2.GIT_FILEMODE_LINK: "120000", pygit2.GIT_FILEMODE_COMMIT: "160000"}


def new_change_id() -> str:
    """32 letters k-z: the reverse hex of 16 random bytes (Jujutsu's change ids)."""
    return "".join(chr(ord("z") - int(c, 16)) for c in secrets.token_bytes(16).hex())


def is_change_id(value) -> bool:
    return isinstance(value, str) and len(value) == 32 and all("k" <= c <= "z" for c in value)


def check_files(value) -> list[dict]:
    """The file changes of a request, each path checked (service.paths) and named once."""
    if not isinstance(value, list) or len(value) > 100_000:
        raise LoncaError("invalid", "files is a list of file changes")
    out, seen = [], set()
    for f in value:
        if not isinstance(f, dict) or set(f) - {"path", "content_b64", "mode"} or not isinstance(f.get("path"), str):
            raise LoncaError("invalid", 'a file change is {"path", "content_b64": base64 | null, "mode"}')
        mode = f.get("mode")
        path = check_path(f["path"], symlink=mode == "symlink")
        if path in seen:
            raise LoncaError("invalid", f"the path {path!r} appears twice; name each file once")
        seen.add(path)
        if mode == "submodule":
            raise LoncaError("invalid", f"{path}: a change can not write a submodule; delete it (content_b64 null) "
                                        "or write a file in its place")
        if mode is not None and mode not in MODES:
            raise LoncaError("invalid", f"{path}: mode is regular, executable or symlink (or null to keep the file's)")
        content = f.get("content_b64")
        data = None
        if content is not None:
            if not isinstance(content, str):
                raise LoncaError("invalid", f"{path}: content_b64 is a base64 string or null")
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise LoncaError("invalid", f"{path}: content_b64 is not base64") from None
        out.append({"path": path, "data": data, "mode": mode})
    return out


class TreeMaps:
    """path -> TreeEntry of a commit's tree, kept for the last few commits (bases repeat)."""

    def __init__(self, size: int = 64):
        self._maps: OrderedDict[str, dict[str, TreeEntry]] = OrderedDict()
        self._lock = threading.Lock()  # shared by the worker's threads
        self.size = size

    def get(self, repo: pygit2.Repository, commit_id: str) -> dict[str, TreeEntry]:
        with self._lock:
            m = self._maps.get(commit_id)
            if m is not None:
                self._maps.move_to_end(commit_id)
                return m
        m = tree_map(repo, repo.get(commit_id).tree)
        with self._lock:
            self._maps[commit_id] = m
            if len(self._maps) > self.size:
                self._maps.popitem(last=False)
        return m


def tree_map(repo: pygit2.Repository, tree: pygit2.Tree) -> dict[str, TreeEntry]:
    return {p: TreeEntry(str(oid), OCTAL.get(m, "100644")) for p, oid, m in walk_tree(repo, tree)}


def commit_exists(repo: pygit2.Repository, commit_id: str) -> bool:
    try:
        commit_of(repo, commit_id)
        return True
    except (LoncaError, TypeError):
        return False


def build_commit(repo: pygit2.Repository, base: str, files: list[dict], message: str, author: str, now_ms: int,
                 base_map: dict[str, TreeEntry], case_twins: bool = True) -> tuple[str, dict[str, TreeEntry]]:
    """The commit of `files` (check_files's) on `base` (refs untouched) and the new tree's path
    map, read back from the tree written: what facts, leases and scope are decided on is what
    the commit holds, never the paths the request named. `case_twins`: whether a new name may
    differ from another only in case."""
    base_tree = repo.get(base).tree
    check_tree(repo, base_tree, files, case_twins)
    index = pygit2.Index()
    index.read_tree(base_tree)
    for f in files:  # deletions first: a file may take the place of a directory this change empties
        if f["data"] is None:
            index.remove(f["path"])  # a file of the base: check_tree refused any other deletion
    for f in files:
        if f["data"] is None:
            continue
        mode = file_mode(f, base_map.get(f["path"]))
        if mode == pygit2.GIT_FILEMODE_LINK:
            check_path(f["path"], symlink=True)  # the mode may be the base's, kept by mode null
            check_symlink_target(f["path"], f["data"])
        try:
            index.add(pygit2.IndexEntry(f["path"], repo.create_blob(f["data"]), mode))
        except pygit2.GitError as e:  # a rule of libgit2's that service.paths does not know yet
            raise LoncaError("invalid", f"the path {f['path']!r} can not be written: {e}") from None
    tree = repo[index.write_tree(repo)]
    who = pygit2.Signature(author[:200] or "agent", DAEMON_SIG[1], now_ms // 1000, 0)
    commit = repo.create_commit(None, who, pygit2.Signature(*DAEMON_SIG, now_ms // 1000, 0), message, tree.id,
                                [pygit2.Oid(hex=base)])
    return str(commit), built_map(repo, base_tree, tree, base_map)


def file_mode(f: dict, old: TreeEntry | None) -> int:
    """The mode a file change writes: the one it names, else the base file's (a submodule's
    place takes a regular file), else regular."""
    if f["mode"]:
        return MODES[f["mode"]]
    return int(old.mode, 8) if old and old.mode != "160000" else pygit2.GIT_FILEMODE_BLOB


def built_map(repo: pygit2.Repository, base_tree: pygit2.Tree, tree: pygit2.Tree,
              base_map: dict[str, TreeEntry]) -> dict[str, TreeEntry]:
    """`base_map` with the differences git finds between the two trees (blob, mode or type),
    so a path the index took differently from the request is seen as it was written."""
    deltas = list(repo.diff(base_tree, tree).deltas)
    new_map = dict(base_map)
    for d in deltas:  # a change of type may come as a deletion and an addition of one path
        if d.status == pygit2.GIT_DELTA_DELETED:
            new_map.pop(d.old_file.path, None)
    for d in deltas:
        if d.status != pygit2.GIT_DELTA_DELETED:
            new_map[d.new_file.path] = TreeEntry(str(d.new_file.id), OCTAL.get(d.new_file.mode, "100644"))
    return new_map


def facts_of(repo: pygit2.Repository, cache: SymbolCache, base: str, base_map: dict, new_map: dict):
    """Facts of a proposal on commit `base` (whose index the symbol warmer may have kept)."""
    return compute_facts(base_map, new_map, lambda oid: repo[oid].data, cache, base)
