"""The install file, daemon.toml (seed 001, "Verifying the daemon" and ping.hardened): root writes
it once to name the uid the daemon runs as (README, "Agents under another user"). Clients read it
to know which uid to trust; the worker reads it at start to know whether it is the daemon of a
hardened install; `lonca doctor` reads it to say which mode it finds, and why. One reader for the
three, so they can not disagree on what makes the file trustworthy.

LONCA_DAEMON_TOML names another path, for tests (which run as root and can make such a file in a
temporary folder). It is held to the same rules: a file and a folder that only root can write, so
whoever sets the variable can not make a worker claim a hardened install with a file of their
own; and a client's environment already chooses its socket (LONCA_SOCKET), so the variable gives
it nothing it did not have."""
import os
import stat
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

DAEMON_TOML = Path("/Library/Lonca/daemon.toml") if sys.platform == "darwin" else Path("/etc/lonca/daemon.toml")
ROOT_ONLY = "as root: chown root:root {path} {folder} && chmod 644 {path} && chmod 755 {folder}"


def daemon_toml() -> Path:
    return Path(os.environ.get("LONCA_DAEMON_TOML") or DAEMON_TOML)


@dataclass(frozen=True)
class Install:
    path: Path
    daemon_uid: int | None  # the uid the file names; None without a file (or one not trusted)
    problem: str | None     # the file is there but is not to be trusted: why

    @property
    def hint(self) -> str:
        return ROOT_ONLY.format(path=self.path, folder=self.path.parent)


def _root_only(path: Path, what: str) -> str | None:
    st = os.stat(path)
    if st.st_uid != 0:
        return f"{what} {path} belongs to uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} {path} is writable by group or others"
    return None


def read(path: Path | None = None) -> Install:
    """The install file at `path` (default: daemon_toml()). Trusted when the file is a regular file
    and it and its folder belong to root and are writable by nobody else: anyone who could write
    either could name the uid clients trust."""
    path = path or daemon_toml()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Install(path, None, None)
    except OSError as e:
        return Install(path, None, f"{path} can not be read ({e.strerror})")
    if not stat.S_ISREG(st.st_mode):
        return Install(path, None, f"{path} is not a regular file")
    try:
        problem = _root_only(path, "the file") or _root_only(path.resolve().parent, "its folder")
    except OSError as e:
        problem = f"{path} can not be checked ({e.strerror})"
    if problem:
        return Install(path, None, f"{problem}; refusing to trust it")
    try:
        uid = tomllib.loads(path.read_text())["daemon_uid"]
    except (OSError, UnicodeDecodeError, KeyError, tomllib.TOMLDecodeError) as e:
        return Install(path, None, f"{path} names no daemon_uid ({e})")
    if not isinstance(uid, int) or isinstance(uid, bool) or uid < 0:
        return Install(path, None, f"{path}: daemon_uid must be a uid (an integer), not {uid!r}")
    return Install(path, uid, None)


def daemon_mode(uid: int, install: Install) -> tuple[bool, str]:
    """(hardened, a sentence saying why) for a daemon running as `uid` (seed 001, ping.hardened:
    "its uid named in the root-owned daemon.toml")."""
    if install.problem:
        return False, f"not hardened: {install.problem} (clients refuse this daemon too; {install.hint})"
    if install.daemon_uid is None:
        return False, f"cooperative: no {install.path}"
    if install.daemon_uid != uid:
        return False, (f"not hardened: {install.path} names uid {install.daemon_uid} as the daemon's, not this "
                       f"daemon's uid {uid} (clients that read it refuse this daemon)")
    return True, f"hardened: {install.path} names this daemon's uid {uid}"
