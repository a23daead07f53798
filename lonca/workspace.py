"""An agent's workspace: a git checkout of trunk with `.lonca/` beside the files.

`.lonca/session` holds the agent's token ({"token", "expires_ms"}, mode 0600) and nothing else
holds it; `.lonca/workspace.json` holds the repository, the session, the base commit and the
trunk copies the last sync wrote. Local changes are what git sees changed against the base.

`sync` brings trunk in through the worker's symbol merge (trunk.merge), which names every path
the workspace must change to hold the merge; sync writes those and nothing else (a file trunk and
the workspace agree on is never touched), then moves the base (HEAD and index, never the files)
to trunk. Before it writes, it keeps what each of those paths held in `.lonca/sync-backup.json`:
a failure puts them back at once, and a crash is undone by the next command that reads the local
changes.

A workspace of a repository where a human redacted a blob in trunk's history can not take
trunk.bundle (seed 001: `redacted`, "git needs whole objects, work from a workspace"): it is
built from `tree` and `blobs` instead, as one commit of trunk's tree with no history and without
the files whose blobs are served as null (`head`, `redacted` in workspace.json; docs/decisions.md,
"A workspace of a trunk with a redacted blob is built from tree and blobs")."""
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
from lonca.protocol import BIG_LINE_MAX, LoncaError, claim_from_facts

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
    # built from tree and blobs (no history): the local commit that stands for `base`, and base's
    # files left out of it because their blobs are redacted; None and [] for a workspace of bundles
    head: str | None = None
    redacted: list[str] = field(default_factory=list)

    @property
    def local_base(self) -> str:
        """The commit the checkout's HEAD is at when it has no local changes."""
        return self.head or self.base

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
                                                   "trunk_copies": self.trunk_copies, "head": self.head,
                                                   "redacted": self.redacted}) + "\n").encode())


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
            return Workspace(d, data["repo"], data.get("session"), data["base"], data.get("trunk_copies", []),
                             data.get("head"), data.get("redacted", []))
    raise Usage("not in a Lonca workspace (no .lonca/workspace.json here or above): `lonca session start` makes an "
                "agent's, `lonca workspace create` yours (a plain git checkout takes trunk with git itself)")


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


def _fetch_trunk(root: Path, client: Client, repo: str, token: str, have: list[str]) -> str | None:
    """Fetch trunk into refs/lonca/trunk with a bundle from the worker; returns trunk's id, or
    None when the worker refuses the bundle because a redacted blob is among its objects."""
    try:
        b = client.call("trunk.bundle", {"have": have}, repo=repo, token=token)
    except LoncaError as e:
        if e.code == "redacted":
            return None
        raise
    if not b["up_to_date"]:
        with tempfile.NamedTemporaryFile(suffix=".bundle", delete=False) as f:
            f.write(base64.b64decode(b["bundle_b64"]))
        try:
            git(root, "fetch", "-q", f.name, "+refs/heads/main:refs/lonca/trunk")
        finally:
            os.unlink(f.name)
    git(root, "update-ref", "refs/lonca/trunk", b["trunk"])
    return b["trunk"]


GIT_MODES = {"regular": "100644", "executable": "100755", "symlink": "120000", "submodule": "160000"}
FETCH_BUDGET = BIG_LINE_MAX * 3 // 4   # seed 001, blobs: a page's base64 within three quarters of MAX_LINE


def _b64_size(n: int) -> int:
    return (n + 2) // 3 * 4


def _present(root: Path, oids: set[str]) -> set[str]:
    """The blobs of `oids` this checkout's object store holds already."""
    if not oids:
        return set()
    out = git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)",
              input="".join(f"{o}\n" for o in sorted(oids)).encode())
    return {w[0] for w in (line.split() for line in out.decode().splitlines()) if len(w) == 2 and w[1] == "blob"}


def _pages(files: list[dict], budget: int) -> list[list[dict]]:
    """`files` in pages whose contents fit `budget` once encoded (seed 001, blobs); a file over
    it goes alone, since a redacted one is answered null whatever its size."""
    pages: list[list[dict]] = [[]]
    used = 0
    for f in files:
        size = _b64_size(f["size"])
        if size > budget:
            pages.insert(0, [f])
            continue
        if used + size > budget and pages[-1]:
            pages.append([])
            used = 0
        pages[-1].append(f)
        used += size
    return [p for p in pages if p]


def _quote(path: str) -> str:
    """A path as git fast-import reads it: C-quoted when it starts with a quote (Lonca's paths hold
    no control characters, so nothing else needs it)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"' if path.startswith('"') else path


def build_from_pages(root: Path, client: Client, repo: str, token: str, commit: str) -> tuple[str, list[str]]:
    """Trunk's commit `commit` as one local commit with no history, built from `tree` and `blobs`
    (what the worker serves when a redacted blob stops its bundle): (the local commit, the paths
    left out because their blobs are redacted). Only blobs this checkout lacks are fetched, page
    by page, into one `git fast-import`, which writes the blobs and the commit."""
    manifest = client.call("tree", {"commit": commit, "with_content": False, "paths": None}, repo=repo, token=token)
    have = _present(root, {f["blob"] for f in manifest if f["mode"] != "submodule"})
    wanted = list({f["blob"]: f for f in manifest if f["mode"] != "submodule" and f["blob"] not in have}.values())
    budget = int(os.environ.get("LONCA_FETCH_BUDGET") or FETCH_BUDGET)
    proc = subprocess.Popen(["git", "-C", str(root), "fast-import", "--quiet", "--force", "--done"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    gone: set[str] = set()
    try:
        bar = Progress("fetching", len(wanted))
        done = 0
        for page in _pages(wanted, budget):
            try:
                got = client.call("blobs", {"commit": commit, "paths": [f["path"] for f in page]}, repo=repo, token=token)
            except LoncaError as e:
                if e.code != "too_large" or len(page) != 1:
                    raise
                raise Usage(f"{page[0]['path']} ({page[0]['size']} bytes) does not fit one page of blobs; read it from "
                            "a git checkout") from None
            for f in got:
                if f["content_b64"] is None:    # seed: null for a redacted blob
                    gone.add(f["blob"])
                    continue
                data = base64.b64decode(f["content_b64"])
                proc.stdin.write(b"blob\ndata %d\n%s\n" % (len(data), data))
            done += len(page)
            bar.step(done)
        bar.done()
        left_out = sorted(f["path"] for f in manifest if f["blob"] in gone)
        message = (f"trunk {commit}, without its history\n\nBuilt from tree and blobs: a redacted blob is in trunk's "
                   f"history. {len(left_out)} redacted files left out.\n").encode()
        proc.stdin.write(b"reset refs/lonca/base\ncommit refs/lonca/base\ncommitter lonca <lonca@localhost> 0 +0000\n"
                         b"data %d\n%s" % (len(message), message))
        for f in manifest:
            if f["blob"] not in gone:
                proc.stdin.write(f"M {GIT_MODES[f['mode']]} {f['blob']} {_quote(f['path'])}\n".encode())
        proc.stdin.write(b"\ndone\n")
        proc.stdin.close()
        err = proc.stderr.read() if proc.stderr else b""
        if proc.wait(GIT_TIMEOUT_S) != 0:
            raise Usage(f"git fast-import failed: {err.decode(errors='replace').strip()}")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return git(root, "rev-parse", "refs/lonca/base").decode().strip(), left_out


def create(client: Client, repo: str, token: str, dest: Path, session: str | None) -> Workspace:
    """A checkout of trunk: fetched with a bundle, else (a redacted blob in trunk's history)
    built from tree and blobs without the redacted files (`redacted` names them)."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise Usage(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "work")
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(EXCLUDES)
    trunk = _fetch_trunk(dest, client, repo, token, [])
    ws = Workspace(dest, repo, session, trunk or "")
    if trunk is None:
        ws.base = _trunk_id(client, repo, token)
        ws.head, ws.redacted = build_from_pages(dest, client, repo, token, ws.base)
    git(dest, "reset", "-q", "--hard", ws.local_base)
    (dest / ".lonca").mkdir(mode=0o700, exist_ok=True)
    ws.save()
    return ws


def _trunk_id(client: Client, repo: str, token: str) -> str:
    return client.call("status", {"lists": []}, repo=repo, token=token)["trunk"]


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
        ws.base, ws.head, ws.redacted = saved["base_before"], saved.get("head_before"), saved.get("redacted_before", [])
        if git(ws.root, "rev-parse", "HEAD").decode().strip() != ws.local_base:
            git(ws.root, "reset", "-q", "--mixed", ws.local_base)  # fails? the backup stays for the next try
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


def sync(ws: Workspace, client: Client, token: str) -> dict:
    """trunk.merge of the local changes, written; `token` is the agent's in its workspace, the
    human's in a workspace of `workspace create`. Trunk comes with a bundle, or from tree and
    blobs once a redacted blob is in the way (then for good: the workspace has no history)."""
    files = local_changes(ws)
    for copy in ws.trunk_copies:  # trunk's copies of the last sync go; they are never local changes
        _remove(ws.root, ws.root / copy)
    ws.trunk_copies = []
    before = ws.base
    fetched = _fetch_trunk(ws.root, client, ws.repo, token, [before]) if ws.head is None else None
    trunk = fetched or _trunk_id(client, ws.repo, token)
    if trunk == before:
        ws.save()
        return {"base_before": before, "base_after": before, "updated": [], "merged": [], "conflicts": [],
                "redacted": ws.redacted}
    m = client.call("trunk.merge", {"base": before, "files": files}, repo=ws.repo, token=token)
    head, redacted = (None, []) if fetched else build_from_pages(ws.root, client, ws.repo, token, m["trunk"])
    marked, conflicts = _conflict_writes(m, {f["path"]: f for f in files})
    left_out = set(redacted)   # trunk's redacted files: not written, and removed where an older copy stands
    blobs = _blobs(ws.root, {f["blob"] for f in m["files"] if "blob" in f and f["path"] not in left_out})
    writes, held = [], []  # what to write where it is not there yet, and what stands there now
    for f in m["files"] + marked:
        content = (None if f["path"] in left_out else base64.b64encode(blobs[f["blob"]]).decode()) if "blob" in f \
            else f["content_b64"]
        target = {"path": f["path"], "content_b64": content, "mode": f["mode"] if content is not None else None}
        now = _file_change(ws.root, f["path"])
        if now != target:
            writes.append(target)
            held.append(now)
    write_private(backup_file(ws.root), json.dumps({"base_before": before, "base_after": m["trunk"], "files": held,
                                                    "head_before": ws.head, "redacted_before": ws.redacted}).encode())
    head_before, redacted_before = ws.head, ws.redacted
    try:
        _write_files(ws.root, writes)
        git(ws.root, "reset", "-q", "--mixed", head or m["trunk"])  # HEAD and index to trunk; the files stay
        ws.base, ws.head, ws.redacted = m["trunk"], head, redacted
        ws.trunk_copies = [c["trunk_copy"] for c in conflicts if c["trunk_copy"]]
        ws.save()
    except BaseException as e:
        ws.base, ws.head, ws.redacted = before, head_before, redacted_before
        _restore_backup(ws)
        if isinstance(e, (OSError, Usage)):
            raise Usage(f"sync stopped ({e}); the workspace is as it was before the sync") from None
        raise
    backup_file(ws.root).unlink()
    return {"base_before": before, "base_after": m["trunk"], "updated": m["updated"], "merged": m["merged"],
            "conflicts": conflicts, "redacted": redacted}


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
