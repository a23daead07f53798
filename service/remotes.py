"""Remotes the daemon fetches from and pushes to (seed 001, repo.prepare_init's `import_from`):
which ones a request may name, and `git` run against them.

Fetch and push run the `git` program, not pygit2: git's own credential helpers, its ssh (with the
user's agent, `~/.ssh/config` and known hosts) and its TLS settings do the authentication, so no
password ever passes through Lonca, its log or a URL (docs/decisions.md, "Bridges to the forge").
Each run is bounded as a verification check is (queue.checks.run_check): its own process group, a
hard time limit, capped output, and the group killed at the end, so an ssh that hangs on a dead
host never outlives it. It has no terminal (a new session): a remote that wants a password it
cannot get from a helper or an agent fails with git's message instead of waiting for a prompt."""
import os
from pathlib import Path
import re
import secrets
import shutil
import stat

import pygit2

from lonca.protocol import LoncaError
from lonca.queue.checks import run_check

from .config import Config
from . import gitstore
from .gitstore import TRUNK_REF

REMOTE_RE = re.compile(r"^(https://|ssh://|[^/@\s:]+@[^:\s/]+:)")
GIT_TIMEOUT_S = 300
MAX_OUTPUT = 256 * 1024
# What git needs of the worker's environment to find the user's credentials and settings, and no more.
GIT_ENV = ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT",
           "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "XDG_CONFIG_HOME", "GIT_ASKPASS", "SSH_ASKPASS",
           "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "LANG", "LC_ALL")
# Only the transports the seed names (no ext::, fd::, git:// or plain http://, whatever a remote's
# spelling); and no automatic gc after a fetch: most of a store's objects are reachable from no ref
# (a proposal's commit lives in the log), so its prune would delete them (service/store_packer.py).
GIT_CONFIG = ("-c", "protocol.allow=never", "-c", "protocol.file.allow=always", "-c", "protocol.https.allow=always",
              "-c", "protocol.ssh.allow=always", "-c", "gc.auto=0", "-c", "maintenance.auto=false")


def check_remote(config: Config, source: str, what: str = "the remote", push: bool = False, backups: bool = False) -> bool:
    """True when `source` is a bundle of the import folder (read from a copy: fetch's
    `from_copy`). `invalid` for a remote of another form or one holding a password;
    `forbidden` for a local path the daemon may not use: inside its home, outside every
    --local-root given (with `backups`, the daemon's own backups excepted), anything in the
    import folder but a regular file directly in it, and a push there; `git` for a path that
    does not exist."""
    if source.startswith("-"):
        raise LoncaError("invalid", f"{what} may not begin with '-'")
    if not source.startswith("/"):
        if not REMOTE_RE.match(source):
            raise LoncaError("invalid", f"{what} is an absolute path, https://, ssh:// or user@host:path")
        if re.match(r"^(https|ssh)://[^/@]*:[^/@]*@", source):
            raise LoncaError("invalid", f"{what} may not hold a password: name the user only and let git's "
                                        "credential helper or your SSH agent authenticate")
        return False
    p = Path(source).resolve()
    drop = config.import_dir.resolve() if config.import_dir else None
    if drop is not None and (Path(source).parent.resolve() == drop or drop in p.parents or p == drop):
        if push:
            raise LoncaError("forbidden", f"{what} may not be in the import folder {drop}: it is read, never written")
        if Path(source).parent.resolve() != drop or not Path(source).is_file() or Path(source).is_symlink():
            raise LoncaError("forbidden", f"in the import folder {drop}, {what} is a Git bundle directly in it (a "
                                          "regular file, not a link)")
        return True
    home = config.home.resolve()
    own_backup = backups and config.backups_dir.resolve() in p.parents
    if (p == home or home in p.parents) and not own_backup:
        raise LoncaError("forbidden", f"{what} may not name a path inside the daemon's home")
    if config.local_roots and not own_backup and not any(p == r.resolve() or r.resolve() in p.parents for r in config.local_roots):
        raise LoncaError("forbidden", f"{what} is outside the folders this daemon may read (--local-root: "
                                      f"{', '.join(str(r) for r in config.local_roots)})")
    if not p.exists():
        raise LoncaError("git", f"{source} does not exist")
    return False


def _copy_bundle(source: str, folder: Path) -> Path:
    """A copy of the bundle at `source`, opened without following a link (it may have been
    replaced by one since it was checked), in `folder`."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise LoncaError("forbidden", f"{source} can not be read as a regular file: {e.strerror}") from None
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise LoncaError("forbidden", f"{source} is not a regular file")
        copy = folder / f"lonca-import-{secrets.token_hex(8)}.bundle"
        with open(copy, "wb") as out:
            shutil.copyfileobj(src, out)
    return copy


def run_git(store: Path, *args: str) -> str:
    """git's output (stdout and stderr as they came) for a run against the bare store at
    `store`; `git` with that output when it fails or runs past its time."""
    run = run_check(["git", "--git-dir", str(store), *GIT_CONFIG, *args], store, GIT_ENV, GIT_TIMEOUT_S, MAX_OUTPUT)
    text = run.output.decode("utf-8", "replace").strip()
    if run.timed_out:
        raise LoncaError("git", f"git {args[0]} ran past {GIT_TIMEOUT_S} s and was stopped")
    if run.result != "pass":
        raise LoncaError("git", text or run.error or f"git {args[0]} failed")
    return text


def fetch_every_ref(store: Path, remote: str, from_copy: bool = False) -> None:
    """Every ref of `remote` (a backup bundle, a bare store, a remote Lonca pushed to) into the
    new store at `store`, under the same names."""
    if from_copy:
        copy = _copy_bundle(remote, store.parent)
        try:
            return fetch_every_ref(store, str(copy))
        finally:
            copy.unlink(missing_ok=True)
    run_git(store, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, "+refs/*:refs/*")


def fetch(store: Path, remote: str, branch: str, from_copy: bool = False) -> str:
    """The commit `branch` of `remote`, its objects fetched into the store; `git` when it can
    not be fetched. With from_copy, `remote` is a bundle of the import folder, read from a copy of
    our own (check_remote)."""
    if from_copy:
        copy = _copy_bundle(remote, store.parent)
        try:
            return fetch(store, str(copy), branch)
        finally:
            copy.unlink(missing_ok=True)
    src = f"refs/heads/{branch}"
    if not pygit2.reference_is_valid_name(src):
        raise LoncaError("invalid", f"{branch!r} is not a branch name git accepts")
    ref = f"refs/lonca/fetch/{secrets.token_hex(8)}"  # this fetch's own: two imports never mix
    run_git(store, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, f"+{src}:{ref}")
    repo = pygit2.Repository(str(store))
    try:
        return str(repo.references[ref].peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError) as e:
        raise LoncaError("git", f"{remote} {branch} is not a commit: {e}") from None
    finally:
        repo.references.delete(ref)


def push(store: Path, remote: str, refs: dict[str, str]) -> str:
    """Push each commit to its ref of the remote (ref -> commit), fast-forward only and all or
    none (--atomic: a refused trunk leaves no log ref behind); git's porcelain output."""
    return run_git(store, "push", "--porcelain", "--atomic", remote, *(f"{commit}:{ref}" for ref, commit in refs.items()))


def redacted_to_send(store: Path, remote: str, heads: list[str], redacted: frozenset[str]) -> str | None:
    """The first redacted blob a push of `heads` would hand `remote`: one the heads reach and no
    ref of the remote does. A remote ref this store does not know excludes nothing, so the answer
    errs on the side of refusing (git needs whole objects: a redacted blob goes as it is)."""
    if not redacted:
        return None
    repo = pygit2.Repository(str(store))
    held = [line.split("\t", 1)[0] for line in run_git(store, "ls-remote", remote).splitlines() if "\t" in line]
    known = [sha for sha in dict.fromkeys(held) if pygit2.Oid(hex=sha) in repo.odb]
    listed = run_git(store, "rev-list", "--objects", *heads, *[f"^{sha}" for sha in known])
    found = sorted(redacted & {line.split(" ", 1)[0] for line in listed.splitlines()})
    return found[0] if found else None


def default_branch(store: Path, remote: str) -> str:
    """The branch the remote's HEAD names (a repository made with `git init -b trunk`, or a
    `master` one, has no `main`); `main` when it names none, as a bundle may not."""
    for line in run_git(store, "ls-remote", "--symref", remote, "HEAD").splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line[len("ref: refs/heads/"):-len("\tHEAD")]
    return "main"


def import_store(path: Path, source: str, branch: str | None, from_copy: bool = False) -> tuple[str, str]:
    """A new bare store at `path` whose trunk is `branch` (default: the source's default branch)
    of `source`: (trunk, the branch fetched). Nothing is left at `path` when it fails."""
    gitstore.init_store(path)
    try:
        branch = branch or ("main" if from_copy else default_branch(path, source))
        commit = fetch(path, source, branch, from_copy)
        pygit2.Repository(str(path)).references.create(TRUNK_REF, pygit2.Oid(hex=commit), force=True)
    except LoncaError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return commit, branch
