"""Remotes the daemon fetches from and pushes to (seed 001, repo.prepare_init's `import_from`):
which ones a request may name, and `git` run against them.

Fetch and push run the `git` program, not pygit2: git's own credential helpers, its ssh (with the
user's agent, `~/.ssh/config` and known hosts) and its TLS settings do the authentication, so no
password ever passes through Lonca, its log or a URL (docs/decisions.md, "Bridges to the forge").
Each run is bounded as a verification check is (queue.checks.run_check): its own process group, a
hard time limit, capped output, and the group killed at the end, so an ssh that hangs on a dead
host never outlives it. It has no terminal (a new session): a remote that wants a password it
cannot get from a helper or an agent fails with git's message instead of waiting for a prompt."""
from pathlib import Path
import re
import secrets
import shutil

import pygit2

from lonca.protocol import LoncaError
from lonca.queue.checks import run_check

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


def check_remote(home: Path, source: str, what: str = "the remote") -> None:
    """`invalid` for a remote of another form or one holding a password, `forbidden` for a path
    inside the daemon's home, `git` for a path that does not exist."""
    if source.startswith("-"):
        raise LoncaError("invalid", f"{what} may not begin with '-'")
    if source.startswith("/"):
        p = Path(source).resolve()
        home = home.resolve()
        if p == home or home in p.parents:
            raise LoncaError("forbidden", f"{what} may not name a path inside the daemon's home")
        if not p.exists():
            raise LoncaError("git", f"{source} does not exist")
        return
    if not REMOTE_RE.match(source):
        raise LoncaError("invalid", f"{what} is an absolute path, https://, ssh:// or user@host:path")
    if re.match(r"^(https|ssh)://[^/@]*:[^/@]*@", source):
        raise LoncaError("invalid", f"{what} may not hold a password: name the user only and let git's credential "
                                    "helper or your SSH agent authenticate")


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


def fetch(store: Path, remote: str, branch: str | None) -> str:
    """The commit `branch` (default: what the remote's HEAD names) of `remote`, its objects
    fetched into the store; `git` when it can not be fetched."""
    src = "HEAD" if branch is None else f"refs/heads/{branch}"
    if branch is not None and not pygit2.reference_is_valid_name(src):
        raise LoncaError("invalid", f"{branch!r} is not a branch name git accepts")
    ref = f"refs/lonca/fetch/{secrets.token_hex(8)}"  # this fetch's own: two imports never mix
    run_git(store, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, f"+{src}:{ref}")
    repo = pygit2.Repository(str(store))
    try:
        return str(repo.references[ref].peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError) as e:
        raise LoncaError("git", f"{remote} {branch or 'HEAD'} is not a commit: {e}") from None
    finally:
        repo.references.delete(ref)


def push(store: Path, remote: str, commit: str, branch: str) -> str:
    """Push `commit` to the remote's `branch`, fast-forward only; git's porcelain output."""
    return run_git(store, "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}")


def default_branch(store: Path, remote: str) -> str:
    """The branch the remote's HEAD names (a repository made with `git init -b trunk`, or a
    `master` one, has no `main`); `main` when it names none, as a bundle may not."""
    for line in run_git(store, "ls-remote", "--symref", remote, "HEAD").splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line[len("ref: refs/heads/"):-len("\tHEAD")]
    return "main"


def import_store(path: Path, source: str, branch: str | None) -> tuple[str, str]:
    """A new bare store at `path` whose trunk is `branch` (default: the source's default branch)
    of `source`: (trunk, the branch fetched). Nothing is left at `path` when it fails."""
    pygit2.init_repository(str(path), bare=True)
    try:
        branch = branch or default_branch(path, source)
        commit = fetch(path, source, branch)
        pygit2.Repository(str(path)).references.create(TRUNK_REF, pygit2.Oid(hex=commit), force=True)
    except LoncaError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return commit, branch
