"""The method table: every method with the credential it requires (seed 001, "Credentials").
docs/decisions.md, "Daemon authentication", lists the same table; a test keeps both equal."""
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from lonca.protocol import LoncaError

from .auth import CREDENTIALS, Auth
from .server import Peer

if TYPE_CHECKING:
    from .context import Context


@dataclass
class Call:
    ctx: "Context"  # what a method may use of the worker; never the Daemon itself
    peer: Peer
    method: str
    params: dict
    repo: str | None
    auth: Auth | None
    token: str | None

    def repo_state(self):
        rs = self.ctx.state.repo(self.repo) if self.repo else None
        if rs is None:
            raise LoncaError("not_found" if self.repo else "invalid",
                             f"no repository {self.repo}" if self.repo else f"{self.method} needs repo")
        return rs


@dataclass(frozen=True)
class Method:
    name: str
    credential: str
    fn: Callable[[Call], Awaitable[dict | list]]
    # it appends to the log: its decision runs in the writer, in order, and it answers after the
    # commit; every other method answers from durable state only (Daemon.handle)
    writes: bool = False
    # a read of some paths' leases: it waits itself, after its last read of the state, for the
    # entries in flight on them only (LogWriter.settled_for), not for every entry in flight first
    path_scoped: bool = False


METHODS: dict[str, Method] = {}


def method(name: str, credential: str, writes: bool = False, path_scoped: bool = False):
    assert credential in CREDENTIALS, credential
    assert not (writes and path_scoped), name

    def register(fn):
        METHODS[name] = Method(name, credential, fn, writes, path_scoped)
        return fn
    return register
