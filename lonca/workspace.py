"""An agent's workspace: a git checkout of trunk with `.lonca/` beside the files.

`.lonca/session` holds the agent's token ({"token", "expires_ms"}, mode 0600) and nothing else
holds it; `.lonca/workspace.json` holds the repository, the session, the base commit and the
trunk copies the last sync wrote. Local changes are what git sees changed against the base.

`sync` brings trunk in through the worker's symbol merge (trunk.merge), which names every path
the workspace must change to hold the merge; sync writes those and nothing else (a file trunk and
the workspace agree on is never touched), then moves the base (HEAD and index, never the files)
to trunk. Before it writes, it keeps what each of those paths held in `.lonca/sync-backup.json`:
a failure puts them back at once, and a crash is undone by the next command that reads the local
changes."""
import base64
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


from lonca.client import Client
from lonca.private_files import private_file_ok, write_private
from lonca.output import Usage
from lonca.protocol import claim_from_facts

GIT_TIMEOUT_S = 300
MARKERS = (b"<<<<<<< local", b"=======", b">>>>>>> trunk")
EXCLUDES = "/.lonca/\n*.trunk\n"


def git(root: Path, *args: str, input: bytes | None = None) -> bytes:
    try:
        res = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, input=input)
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
    trunk_copies: list[str] = field(default_factory=list)   # `<path>.trunk` files the last sync wrote

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
        write_private(self.meta_path, (json.dumps({"repo": self.repo, "session": self.session, "base": self.base,
                                                   "trunk_copies": self.trunk_copies}) + "\n").encode())


def meta_file(root: Path) -> Path:
    return root / ".lonca" / "workspace.json"


def token_file(root: Path) -> Path:
    return root / ".lonca" / "session"


def backup_file(root: Path) -> Path:
    """What the paths a sync in progress writes held before it, until it has moved the base."""
    return root / ".lonca" / "sync-backup.json"


def find(start: Path | None = None) -> Workspace:
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        meta = meta_file(d)
        if meta.is_file():
            data = json.loads(meta.read_text())
            return Workspace(d, data["repo"], data.get("session"), data["base"], data.get("trunk_copies", []))
    raise Usage("not in a Lonca workspace (no .lonca/workspace.json here or above); run `lonca session start`")


def find_or_checkout(start: Path | None = None) -> Workspace:
    """The Lonca workspace here or above, else the git checkout here, its HEAD as the base and
    no repository named (a human's checkout: `lonca propose` as a human finds the base)."""
    try:
        return find(start)
    except Usage:
        pass
    here = (start or Path.cwd()).resolve()
    try:
        root = Path(git(here, "rev-parse", "--show-toplevel").decode().strip())
        base = git(root, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()
    except Usage:
        raise Usage("not in a Lonca workspace nor a git checkout with a commit; run `lonca workspace create`") from None
    return Workspace(root, "", None, base)


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
    """The file at `path` as a file change; a folder there (a file replaced by one) is no file."""
    full = root / path
    if full.is_symlink():
        return {"path": path, "content_b64": base64.b64encode(os.readlink(full).encode()).decode(), "mode": "symlink"}
    if not full.is_file():
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
    """The local changes, after undoing a sync that was stopped half-way."""
    _restore_backup(ws)
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


def checkout_changes(root: Path, base: str) -> list[dict]:
    """The files of a git checkout that differ from commit `base`: tracked files changed since
    it, committed or not, and untracked ones (what .gitignore ignores stays out)."""
    tracked = git(root, "-c", "core.quotepath=off", "diff", "--name-only", "-z", "--no-renames", base, "--")
    untracked = git(root, "-c", "core.quotepath=off", "ls-files", "--others", "--exclude-standard", "-z")
    paths = sorted({p.decode() for p in tracked.split(b"\0") + untracked.split(b"\0") if p})
    return [_file_change(root, p) for p in paths]


def proposal_files(ws: Workspace, files: list[dict] | None = None) -> list[dict]:
    """The local changes to propose (`files`, else the workspace's); none, or conflict markers
    left in one, is a usage error."""
    files = local_changes(ws) if files is None else files
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
    """A sync stopped before it moved the base (a crash, a full disk): put back what it wrote
    over, and the base it started from. One stopped after is done: only its backup goes."""
    backup = backup_file(ws.root)
    if not backup.exists():
        return
    saved = json.loads(backup.read_text())
    if ws.base != saved["base_after"]:
        _write_files(ws.root, saved["files"])
        if git(ws.root, "rev-parse", "HEAD").decode().strip() != saved["base_before"]:
            git(ws.root, "reset", "-q", "--mixed", saved["base_before"])  # fails? the backup stays for the next try
        ws.base = saved["base_before"]
        ws.save()
    backup.unlink()


def _write_files(root: Path, files: list[dict]) -> None:
    """Write each file change; removals first, since a folder may give way to a file of its
    name or a file to a folder. A folder that still holds files is never removed: writing a file
    there fails (OSError) instead."""
    for f in files:
        if f["content_b64"] is None:
            _remove(root, root / f["path"])
    for f in files:
        if f["content_b64"] is not None:
            _put(root, f)


def _remove(root: Path, full: Path) -> None:
    if full.is_symlink() or full.is_file():
        full.unlink()
    parent = full.parent  # folders left empty go, as git leaves none
    while parent != root and parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _put(root: Path, f: dict) -> None:
    """One file, written beside `.lonca/` and renamed into place: never half-written."""
    full = root / f["path"]
    full.parent.mkdir(parents=True, exist_ok=True)
    if full.is_dir() and not full.is_symlink():
        full.rmdir()
    data = base64.b64decode(f["content_b64"])
    tmp = root / ".lonca" / f"write-{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    if f.get("mode") == "symlink":
        os.symlink(data.decode(), tmp)
    else:
        tmp.write_bytes(data)
        os.chmod(tmp, 0o755 if f.get("mode") == "executable" else 0o644)
    os.replace(tmp, full)


def _conflict_writes(m: dict, local: dict[str, dict]) -> tuple[list[dict], list[dict]]:
    """(files to write, the conflicts as sync reports them) of trunk.merge's conflicts: the file
    with markers, or the local side as it stands where there is no text to mark; trunk's copy."""
    writes, conflicts = [], []
    for c in m["conflicts"]:
        mine = local.get(c["path"])
        if c["content_b64"] is not None:
            mode = mine["mode"] if mine and mine["mode"] in ("regular", "executable") else "regular"
            writes.append({"path": c["path"], "content_b64": c["content_b64"], "mode": mode})
        copy = None
        if c["trunk_b64"] is not None:
            copy = c["path"] + ".trunk"
            writes.append({"path": copy, "content_b64": c["trunk_b64"], "mode": "regular"})
        conflicts.append({"path": c["path"], "trunk_copy": copy, "symbols": c["symbols"]})
    return writes, conflicts


def _blobs(root: Path, oids: set[str]) -> dict[str, bytes]:
    """The contents of blobs the workspace fetched with trunk, in one `git cat-file --batch`."""
    if not oids:
        return {}
    order = sorted(oids)
    out = git(root, "cat-file", "--batch", input="".join(f"{o}\n" for o in order).encode())
    blobs, at = {}, 0
    for oid in order:
        nl = out.index(b"\n", at)
        header = out[at:nl].split()
        if len(header) != 3 or header[1] != b"blob":
            raise Usage(f"trunk's blob {oid} is missing from this workspace; run `lonca sync` again")
        size = int(header[2])
        blobs[oid] = out[nl + 1: nl + 1 + size]
        at = nl + 1 + size + 1
    return blobs


def sync(ws: Workspace, client: Client) -> dict:
    token = ws.agent_token()
    files = local_changes(ws)
    for copy in ws.trunk_copies:  # trunk's copies of the last sync go; they are never local changes
        _remove(ws.root, ws.root / copy)
    ws.trunk_copies = []
    before = ws.base
    trunk = _fetch_trunk(ws.root, client, ws.repo, token, [before])
    if trunk == before:
        ws.save()
        return {"base_before": before, "base_after": before, "updated": [], "merged": [], "conflicts": []}
    m = client.call("trunk.merge", {"base": before, "files": files}, repo=ws.repo, token=token)
    marked, conflicts = _conflict_writes(m, {f["path"]: f for f in files})
    blobs = _blobs(ws.root, {f["blob"] for f in m["files"] if "blob" in f})
    writes, held = [], []  # what to write where it is not there yet, and what stands there now
    for f in m["files"] + marked:
        content = base64.b64encode(blobs[f["blob"]]).decode() if "blob" in f else f["content_b64"]
        target = {"path": f["path"], "content_b64": content, "mode": f["mode"] if content is not None else None}
        now = _file_change(ws.root, f["path"])
        if now != target:
            writes.append(target)
            held.append(now)
    write_private(backup_file(ws.root), json.dumps({"base_before": before, "base_after": m["trunk"], "files": held}).encode())
    try:
        _write_files(ws.root, writes)
        git(ws.root, "reset", "-q", "--mixed", m["trunk"])  # HEAD and index to trunk; the files stay
        ws.base, ws.trunk_copies = m["trunk"], [c["trunk_copy"] for c in conflicts if c["trunk_copy"]]
        ws.save()
    except BaseException as e:
        ws.base = before
        _restore_backup(ws)
        if isinstance(e, (OSError, Usage)):
            raise Usage(f"sync stopped ({e}); the workspace is as it was before the sync") from None
        raise
    backup_file(ws.root).unlink()
    return {"base_before": before, "base_after": m["trunk"], "updated": m["updated"], "merged": m["merged"],
            "conflicts": conflicts}


def end_files(ws: Workspace) -> list[dict]:
    """session.end's files: each local change as {"path", "entry": {"mode", "blob"} | null}."""
    import pygit2  # only here: importing it costs every other CLI call about 30 ms
    out = []
    for f in local_changes(ws):
        entry = None
        if f["content_b64"] is not None:
            entry = {"mode": f["mode"], "blob": str(pygit2.hash(base64.b64decode(f["content_b64"])))}
        out.append({"path": f["path"], "entry": entry})
    return out
