"""The method table: every method with the credential it requires (seed 001, "Credentials").
docs/decisions.md, "Daemon authentication", lists the same table; a test keeps both equal."""
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from lonca.protocol import LoncaError

from .auth import CREDENTIALS, Auth
from .server import Peer

if TYPE_CHECKING:
    from .daemon import Daemon


@dataclass
class Call:
    daemon: "Daemon"
    peer: Peer
    method: str
    params: dict
    repo: str | None
    auth: Auth | None
    token: str | None

    def repo_state(self):
        rs = self.daemon.state.repo(self.repo) if self.repo else None
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


METHODS: dict[str, Method] = {}


def method(name: str, credential: str, writes: bool = False):
    assert credential in CREDENTIALS, credential

    def register(fn):
        METHODS[name] = Method(name, credential, fn, writes)
        return fn
    return register


def params_of(call: Call, allowed: set[str], required: set[str] = frozenset()) -> dict:
    """The params, refusing unknown and missing names (the seed is strict about shapes)."""
    p = call.params
    unknown = sorted(set(p) - allowed)
    if unknown:
        raise LoncaError("invalid", f"{call.method} takes no parameter {', '.join(unknown)}; it takes {', '.join(sorted(allowed)) or 'none'}")
    missing = sorted(n for n in required if p.get(n) is None)
    if missing:
        raise LoncaError("invalid", f"{call.method} needs {', '.join(missing)}")
    return p


def expect(value, typ, name: str, *, nullable: bool = False):
    if value is None and nullable:
        return None
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        kind = {str: "a string", int: "an integer", dict: "an object", list: "an array", bool: "a boolean"}.get(typ, str(typ))
        raise LoncaError("invalid", f"{name} must be {kind}{' or null' if nullable else ''}")
    return value


_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def expect_id(value, name: str, what: str) -> str:
    """A human's name, a session id, a lease set id: letters, digits, '.', '_' and '-', at most 64."""
    value = expect(value, str, name)
    if not _ID_RE.match(value):
        raise LoncaError("invalid", f"{what} is letters, digits, '.', '_' and '-', at most 64")
    return value


# what libgit2 trims from both ends of a signature's name; a name of nothing else is refused
_GIT_NAME_CRUD = "".join(map(chr, range(33))) + ".,:;<>\"\\'"


def expect_agent_name(value, name: str) -> str:
    """An agent's name, which becomes the author of its commits: 1 to 128 characters, none of
    them a control character, a line or paragraph separator, < or > (git refuses those in an
    author), and more than the punctuation git trims from a name's ends."""
    value = expect(value, str, name)
    bad = [ch for ch in value if ch in "<>" or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")]
    if not 1 <= len(value) <= 128 or bad or not value.strip(_GIT_NAME_CRUD):
        shown = f" ({bad[0]!r} is not allowed)" if bad else ""
        raise LoncaError("invalid", f"{name} is a name of 1 to 128 characters without control characters, "
                                    f"< or >, that git can take as an author{shown}")
    return value
