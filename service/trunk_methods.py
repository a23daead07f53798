"""Trunk for workspaces: trunk.bundle (a git bundle to fetch), trunk.distance, and trunk.merge,
which brings trunk into a workspace's local changes with the merge queue's symbol merge (what
`lonca sync` writes). None of them logs."""
import asyncio
import base64
import subprocess
import tempfile
from pathlib import Path

import pygit2

from lonca.protocol import LoncaError
from lonca.queue import merge_trees

from .change_build import build_commit, check_files, commit_exists, tree_map
from .gitstore import TRUNK_REF, mode_name
from .methods import Call, method
from .read_methods import on_store

GIT_TIMEOUT_S = 120


@method("trunk.bundle", "read")
async def bundle(call: Call) -> dict:
    have = call.params.get("have", [])
    d, rs = call.ctx, call.repo_state()
    known = await on_store(call, lambda store: [h for h in have if commit_exists(store, h)])
    if rs.trunk in known:
        return {"trunk": rs.trunk, "bundle_b64": "", "bytes": 0, "thin": True, "up_to_date": True}

    trunk, redacted = rs.trunk, frozenset(rs.redacted)  # read on the loop
    store_path = str(d.config.store_path(rs.name))

    def run_git(git_dir: str, *args: str) -> bytes:
        try:
            res = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, timeout=GIT_TIMEOUT_S,
                                 env={"PATH": "/usr/bin:/bin"})
        except subprocess.TimeoutExpired:
            raise LoncaError("git", f"git {args[0]} ran past {GIT_TIMEOUT_S} s and was stopped") from None
        if res.returncode != 0:
            raise LoncaError("git", res.stderr.decode(errors="replace").strip() or f"git {args[0]} failed")
        return res.stdout

    def make() -> bytes:
        with tempfile.TemporaryDirectory(prefix="lonca-bundle-") as tmp:
            # The bundle is made in a repository of its own whose only ref is the trunk read above and
            # whose objects are the store's (an alternate): git bundle resolves its ref twice and
            # writes none when the queue moves trunk in between ("Refusing to create empty
            # bundle"), and the answer's trunk is then the bundle's head by construction.
            snap = Path(tmp) / "snapshot.git"
            for folder in ("objects/info", "refs/heads"):
                (snap / folder).mkdir(parents=True)
            (snap / "HEAD").write_text(f"ref: {TRUNK_REF}\n")
            (snap / "objects/info/alternates").write_text(str(Path(store_path, "objects").resolve()) + "\n")
            (snap / TRUNK_REF).write_text(trunk + "\n")
            if redacted:
                listed = run_git(str(snap), "rev-list", "--objects", trunk, *[f"^{h}" for h in known])
                found = sorted(redacted & {line.split(b" ", 1)[0].decode() for line in listed.splitlines()})
                if found:
                    raise LoncaError("redacted", f"a redacted blob ({found[0]}) is among trunk's objects, and git needs "
                                                 "whole objects: read the files with tree and blobs, which serve it as null")
            out = Path(tmp) / "trunk.bundle"
            run_git(str(snap), "bundle", "create", "-q", str(out), TRUNK_REF, *[f"^{h}" for h in known])
            return out.read_bytes()
    data = await asyncio.to_thread(make)
    encoded = base64.b64encode(data).decode()
    if len(encoded) > d.config.limits.page_b64:
        raise LoncaError("too_large", "the bundle does not fit one page; fetch from a closer point (have)")
    return {"trunk": trunk, "bundle_b64": encoded, "bytes": len(data), "thin": bool(known), "up_to_date": False}


@method("trunk.distance", "read")
async def distance(call: Call) -> dict:
    rs = call.repo_state()
    base = call.params["base"]
    at = await rs.trunks.find(base)
    behind = rs.integrations - at if at is not None else None
    return {"trunk": rs.trunk, "base": base, "behind": behind}


@method("trunk.merge", "read")
async def trunk_merge(call: Call) -> dict:
    """{"base", "files"} (the workspace's local changes) -> the same changes on today's trunk:
    {"trunk", "files", "updated", "merged", "conflicts"}. `files` is explicit about every path
    the workspace must change to hold the merge: each path where the merged tree differs from
    the workspace as sent (base plus its files), {"path", "mode", "content_b64"} (null content:
    remove it), or {"path", "mode", "blob"} where the merge is trunk's own file, which the
    workspace fetched with trunk (a sync across many trunk changes answers ids, not contents). A
    path not named is already right, whether trunk and the workspace agree on it or it is a
    local change trunk left alone. Conflicted paths are only in `conflicts`."""
    p = call.params
    d, rs = call.ctx, call.repo_state()
    base = p["base"]
    files = check_files(p["files"])
    trunk, redacted = rs.trunk, frozenset(rs.redacted)

    def work(store: pygit2.Repository) -> dict:
        if not commit_exists(store, base):
            raise LoncaError("not_found", f"no commit {base} in this repository")
        base_map = d.tree_maps.get(store, base)
        local, local_map = (build_commit(store, base, files, "lonca sync", call.auth.agent or call.auth.human or "agent",
                                                         d.now_ms(), base_map)
                            if files else (base, base_map))
        base_tree, trunk_tree = store[base].peel(pygit2.Commit).tree_id, store[trunk].peel(pygit2.Commit).tree_id
        deltas = store.diff(base_tree, trunk_tree).deltas
        updated = sorted({x.new_file.path for x in deltas} | {x.old_file.path for x in deltas})
        result = merge_trees(store, base, trunk, local, d.symbols)
        conflicts = []
        before = d.tree_maps.get(store, trunk)
        if result.tree is None:
            # Merge again with the conflicted files left as trunk has them: everything else merges.
            back = [{"path": path, "data": store[base_map[path].oid].data if path in base_map else None,
                     "mode": mode_name(int(base_map[path].mode, 8)) if path in base_map else None}
                    for path in result.conflicted_paths]
            local2 = build_commit(store, local, back, "lonca sync", "agent", d.now_ms(), local_map)[0]
            again = merge_trees(store, base, trunk, local2, d.symbols)
            merged_tree = again.tree
            for path in result.conflicted_paths:
                # trunk's side of a redacted blob is sent neither alone nor inside conflict markers
                hidden = path in before and str(before[path].oid) in redacted
                text = None if hidden else result.conflict_text(path, trunk[:12])
                # the names are read from both sides' contents too: none of a redacted side's
                symbols = [] if hidden else sorted(c for c in result.conflicts if c.split("#", 1)[0] == path)
                conflicts.append({"path": path, "symbols": symbols,
                                  "content_b64": base64.b64encode(text).decode() if text is not None else None,
                                  "trunk_b64": base64.b64encode(store[before[path].oid].data).decode()
                                  if path in before and not hidden else None})
        else:
            merged_tree = result.tree
        after = tree_map(store, store[merged_tree])
        conflicted = {c["path"] for c in conflicts}
        out_files = []
        for path in sorted(set(local_map) | set(after)):
            entry = after.get(path)
            if local_map.get(path) == entry or path in conflicted:
                continue
            if entry is None:
                out_files.append({"path": path, "content_b64": None, "mode": None})
            elif before.get(path) == entry:
                out_files.append({"path": path, "blob": entry.oid, "mode": mode_name(int(entry.mode, 8))})
            elif path in before and str(before[path].oid) in redacted:
                # merged with trunk's redacted side, so it holds some of it: a conflict sent with
                # neither side, for the workspace to settle from what it has
                conflicts.append({"path": path, "symbols": [], "content_b64": None, "trunk_b64": None})
            else:
                out_files.append({"path": path, "content_b64": base64.b64encode(store[entry.oid].data).decode(),
                                  "mode": mode_name(int(entry.mode, 8))})
        return {"trunk": trunk, "files": out_files, "updated": updated, "merged": result.merged_paths, "conflicts": conflicts}
    return await on_store(call, work)
