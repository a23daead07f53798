"""An agent's workspace: a git checkout of trunk with `.lonca/` beside the files.

`.lonca/session` holds the agent's token ({"token", "expires_ms"}, mode 0600) and nothing else
holds it; `.lonca/workspace.json` holds the repository, the session and the base commit. Local
changes are what git sees changed against the base. `sync` brings trunk in through the worker's
symbol merge (trunk.merge) and writes conflicts with markers and `<path>.trunk` copies; it keeps a
copy of the local changes in `.lonca/sync-backup.json` until the new files are written, so a crash
in between loses nothing (the next sync restores it first)."""
import base64
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pygit2

from lonca.client import Client
from lonca.humankeys import private_file_ok, write_private
from lonca.output import Usage
from lonca.protocol import claim_from_facts

GIT_TIMEOUT_S = 300
MARKERS = (b"<<<<<<< local", b"=======", b">>>>>>> trunk")
EXCLUDES = "/.lonca/\n*.trunk\n"


def git(root: Path, *args: str) -> bytes:
    try:
        res = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S)
    except FileNotFoundError:
        raise Usage("git is not installed; workspaces are git checkouts") from None
    except subprocess.TimeoutExpired:
        raise Usage(f"git {args[0]} ran past {GIT_TIMEOUT_S} s and was stopped") from None
    if res.returncode != 0:
        raise Usage(f"git {args[0]} failed: {res.stderr.decode(errors='replace').strip()}")
    return res.stdout


class Progress:
    """A counter on stderr for long work, only on a terminal."""

    def __init__(self, what: str, total: int):
        self.what, self.total, self.on = what, total, sys.stderr.isatty() and total > 50

    def step(self, n: int) -> None:
        if self.on and (n % 25 == 0 or n == self.total):
            sys.stderr.write(f"\r{self.what} {n}/{self.total}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.on:
            sys.stderr.write("\n")


@dataclass
class Workspace:
    root: Path
    repo: str
    session: str | None
    base: str

    @property
    def meta_path(self) -> Path:
        return meta_file(self.root)

    @property
    def token(self) -> str | None:
        path = token_file(self.root)
        if not private_file_ok(path):
            return None
        try:
            return json.loads(path.read_text())["token"]
        except (ValueError, KeyError, OSError):
            return None

    def agent_token(self) -> str:
        token = self.token
        if token is None:
            raise Usage(f"no usable session token in {token_file(self.root)} (it must be yours, mode 0600)")
        return token

    def save(self) -> None:
        self.meta_path.write_text(json.dumps({"repo": self.repo, "session": self.session, "base": self.base}) + "\n")


def meta_file(root: Path) -> Path:
    return root / ".lonca" / "workspace.json"


def token_file(root: Path) -> Path:
    return root / ".lonca" / "session"


def backup_file(root: Path) -> Path:
    """The local changes of a sync in progress, until its files are written."""
    return root / ".lonca" / "sync-backup.json"


def find(start: Path | None = None) -> Workspace:
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        meta = meta_file(d)
        if meta.is_file():
            data = json.loads(meta.read_text())
            return Workspace(d, data["repo"], data.get("session"), data["base"])
    raise Usage("not in a Lonca workspace (no .lonca/workspace.json here or above); run `lonca session start`")


def write_token(root: Path, token: str, expires_ms: int) -> None:
    write_private(token_file(root), json.dumps({"token": token, "expires_ms": expires_ms}).encode())


def _fetch_trunk(root: Path, client: Client, repo: str, token: str, have: list[str]) -> str:
    """Fetch trunk into refs/lonca/trunk with a bundle from the worker; returns trunk's id."""
    b = client.call("trunk.bundle", {"have": have}, repo=repo, token=token)
    if not b["up_to_date"]:
        with tempfile.NamedTemporaryFile(suffix=".bundle", delete=False) as f:
            f.write(base64.b64decode(b["bundle_b64"]))
        try:
            git(root, "fetch", "-q", f.name, "+refs/heads/main:refs/lonca/trunk")
        finally:
            os.unlink(f.name)
    git(root, "update-ref", "refs/lonca/trunk", b["trunk"])
    return b["trunk"]


def create(client: Client, repo: str, token: str, dest: Path, session: str | None) -> Workspace:
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise Usage(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "work")
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(EXCLUDES)
    trunk = _fetch_trunk(dest, client, repo, token, [])
    git(dest, "reset", "-q", "--hard", trunk)
    (dest / ".lonca").mkdir(mode=0o700, exist_ok=True)
    ws = Workspace(dest, repo, session, trunk)
    ws.save()
    return ws


def _file_change(root: Path, path: str) -> dict:
    full = root / path
    if full.is_symlink():
        return {"path": path, "content_b64": base64.b64encode(os.readlink(full).encode()).decode(), "mode": "symlink"}
    if not full.exists():
        return {"path": path, "content_b64": None, "mode": None}
    mode = "executable" if os.stat(full).st_mode & 0o111 else "regular"
    return {"path": path, "content_b64": base64.b64encode(full.read_bytes()).decode(), "mode": mode}


def changed_paths(ws: Workspace) -> list[str]:
    out = git(ws.root, "-c", "core.quotepath=off", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    paths = []
    for rec in out.split(b"\0"):
        if len(rec) > 3:
            path = rec[3:].decode()
            if not path.endswith("/"):
                paths.append(path)
    return sorted(set(paths))


def local_changes(ws: Workspace) -> list[dict]:
    paths = changed_paths(ws)
    bar = Progress("reading", len(paths))
    out = []
    for i, p in enumerate(paths, 1):
        out.append(_file_change(ws.root, p))
        bar.step(i)
    bar.done()
    return out


def with_markers(files: list[dict]) -> list[str]:
    """Paths of the files that still hold conflict markers of a sync."""
    bad = []
    for f in files:
        if f["content_b64"] and f["mode"] != "symlink":
            lines = base64.b64decode(f["content_b64"]).splitlines()
            if any(line.startswith(m) for line in lines for m in MARKERS):
                bad.append(f["path"])
    return bad


def proposal_files(ws: Workspace) -> list[dict]:
    """The local changes to propose; none, or conflict markers left in one, is a usage error."""
    files = local_changes(ws)
    if not files:
        raise Usage("no local changes to propose")
    marked = with_markers(files)
    if marked:
        raise Usage(f"conflict markers stand in {', '.join(marked)}; resolve them (sync shows them) before proposing")
    return files


def propose(ws: Workspace, client: Client, intent: str) -> dict:
    token = ws.agent_token()
    files = proposal_files(ws)
    preview = client.call("facts.preview", {"base": ws.base, "files": files}, repo=ws.repo, token=token)
    claim = claim_from_facts(preview["facts"], intent)
    res = client.call("change.propose", {"change": None, "base": ws.base, "files": files, "claim": claim},
                      repo=ws.repo, token=token)
    return {"change": res["change"], "commit": res["commit"], "seq": res["seq"], "decision": res["decision"],
            "status": res["status"], "details": res["details"]}


def _restore_backup(ws: Workspace) -> None:
    """A sync that stopped after resetting: put the local changes it saved back first."""
    backup = backup_file(ws.root)
    if backup.exists():
        _write_files(ws.root, json.loads(backup.read_text()))
        backup.unlink()


def _write_files(root: Path, files: list[dict]) -> None:
    for f in files:
        full = root / f["path"]
        if full.is_symlink() or full.exists():
            full.unlink()
        if f["content_b64"] is None:
            continue
        full.parent.mkdir(parents=True, exist_ok=True)
        data = base64.b64decode(f["content_b64"])
        if f.get("mode") == "symlink":
            os.symlink(data.decode(), full)
        else:
            full.write_bytes(data)
            os.chmod(full, 0o755 if f.get("mode") == "executable" else 0o644)


def sync(ws: Workspace, client: Client) -> dict:
    token = ws.agent_token()
    _restore_backup(ws)
    for stale in ws.root.rglob("*.trunk"):  # trunk copies of the last sync go
        if ".git" not in stale.parts and ".lonca" not in stale.parts and stale.is_file():
            stale.unlink()
    files = local_changes(ws)
    before = ws.base
    trunk = _fetch_trunk(ws.root, client, ws.repo, token, [before])
    if trunk == before:
        return {"base_before": before, "base_after": before, "updated": [], "merged": [], "conflicts": []}
    m = client.call("trunk.merge", {"base": before, "files": files}, repo=ws.repo, token=token)
    backup = backup_file(ws.root)
    backup.write_text(json.dumps(files))
    git(ws.root, "reset", "-q", "--hard", m["trunk"])
    merged = {x["path"] for x in m["files"]}
    local = {f["path"]: f for f in files}
    for f in files:  # local additions git does not track: trunk's files replace them below
        if f["content_b64"] is not None and (ws.root / f["path"]).exists() and f["path"] not in merged:
            (ws.root / f["path"]).unlink()
    _write_files(ws.root, m["files"])
    conflicts = []
    for c in m["conflicts"]:
        mine = local.get(c["path"])
        _write_files(ws.root, [{"path": c["path"], "mode": None,
                                "content_b64": c["content_b64"] or (mine["content_b64"] if mine else None)}])
        copy = None
        if c["trunk_b64"] is not None:
            copy = c["path"] + ".trunk"
            _write_files(ws.root, [{"path": copy, "content_b64": c["trunk_b64"], "mode": "regular"}])
        conflicts.append({"path": c["path"], "trunk_copy": copy, "symbols": c["symbols"]})
    ws.base = m["trunk"]
    ws.save()
    backup.unlink()
    return {"base_before": before, "base_after": m["trunk"], "updated": m["updated"], "merged": m["merged"],
            "conflicts": conflicts}


def end_files(ws: Workspace) -> list[dict]:
    """session.end's files: each local change as {"path", "entry": {"mode", "blob"} | null}."""
    out = []
    for f in local_changes(ws):
        entry = None
        if f["content_b64"] is not None:
            entry = {"mode": f["mode"], "blob": str(pygit2.hash(base64.b64decode(f["content_b64"])))}
        out.append({"path": f["path"], "entry": entry})
    return out
