"""One schema per method of the table (seed 001, "Methods" and "Common shapes"), checked at the
edge before the method runs: after it, a method can trust the types and ranges of its params.

A small declarative form of our own (jsonschema is only a test dependency): `Str`, `Int`,
`Bool`, `Arr`, `Obj` and `Tagged` (an object whose kind is one field, as an op's `op`). A refusal
names the field and what it must be, never the value sent: a value may hold anything.
What a schema can not say stays with the method: whether a commit exists, a lease is free, a
signature verifies, and the seed's own reasons for a malformed value it logs (invalid_names,
invalid_checks, intent_required) or answers (bad_nonce).
"""
import re
import unicodedata
from dataclasses import dataclass, field

from lonca.protocol import CLAIM_FIELDS, LoncaError, REPO_NAME_MAX, STATUS_LISTS

from . import paths
from .lease_model import KINDS
from .scope import SCOPE_FIELDS

TEXT_MAX = 4096  # a free-text field: an intent, a note, a reason
NAME_MAX = 128


class Invalid(Exception):
    """`where`: the field, from the schema that refused it down; each enclosing schema puts its
    own step in front as the refusal goes up (`_within`), so an accepted value builds no path."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message


def _within(schema, v, step: str) -> None:
    """`v` checked against `schema`, where `step` ("name" or "[i]") leads from the enclosing value."""
    if v is None and schema.nullable:
        return
    try:
        schema.validate(v)
    except Invalid as e:
        e.where = step + ("." + e.where if e.where and e.where[0] != "[" else e.where)
        raise


@dataclass(frozen=True)
class Str:
    max_len: int = TEXT_MAX
    min_len: int = 0
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    nullable: bool = False
    check: object = None  # a function: value -> problem or None
    what: str = ""  # how a refusal names the shape, when a pattern says it badly

    def __post_init__(self):
        object.__setattr__(self, "_fullmatch", re.compile(self.pattern).fullmatch if self.pattern else None)

    def validate(self, v) -> None:
        if not isinstance(v, str):
            raise Invalid("", f"must be {self.describe()}")
        if self.enum is not None:
            if v not in self.enum:
                raise Invalid("", f"must be {self.describe()}")
            return
        if not self.min_len <= len(v) <= self.max_len or (self._fullmatch and not self._fullmatch(v)):
            raise Invalid("", f"must be {self.describe()}")
        problem = self.check(v) if self.check else None
        if problem:
            raise Invalid("", problem)

    def describe(self) -> str:
        if self.enum is not None:
            return "one of " + ", ".join(f'"{e}"' for e in self.enum)
        if self.what:
            return self.what
        return f"a string of {self.min_len} to {self.max_len} characters"


@dataclass(frozen=True)
class Int:
    lo: int | None = None
    hi: int | None = None
    nullable: bool = False

    def validate(self, v) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or (self.lo is not None and v < self.lo) \
                or (self.hi is not None and v > self.hi):
            raise Invalid("", f"must be {self.describe()}")

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"an integer from {self.lo} to {self.hi}"
        if self.lo is not None:
            return f"an integer of at least {self.lo}"
        return "an integer"


@dataclass(frozen=True)
class Bool:
    nullable: bool = False

    def validate(self, v) -> None:
        if not isinstance(v, bool):
            raise Invalid("", "must be true or false")

    def describe(self) -> str:
        return "a boolean"


@dataclass(frozen=True)
class Arr:
    item: object
    max_items: int = 1000
    min_items: int = 0
    nullable: bool = False

    def validate(self, v) -> None:
        if not isinstance(v, list) or not self.min_items <= len(v) <= self.max_items:
            raise Invalid("", f"must be {self.describe()}")
        item = self.item
        for i, x in enumerate(v):
            if x is None and item.nullable:
                continue
            try:
                item.validate(x)
            except Invalid as e:
                e.where = f"[{i}]" + ("." + e.where if e.where and e.where[0] != "[" else e.where)
                raise

    def describe(self) -> str:
        return f"an array of {self.min_items} to {self.max_items} of {self.item.describe()}"


@dataclass(frozen=True)
class Obj:
    fields: dict = field(default_factory=dict)
    required: frozenset = frozenset()
    nullable: bool = False
    what: str = "an object"
    present: tuple = ()  # fields that must be there, null where their type allows it

    def __post_init__(self):
        object.__setattr__(self, "_names", frozenset(self.fields))
        object.__setattr__(self, "_required", tuple(sorted(self.required)))

    def validate(self, v) -> None:
        if not isinstance(v, dict):
            raise Invalid("", f"must be {self.describe()}")
        if not self._names.issuperset(v):
            unknown = sorted(set(v) - self._names)  # the key itself passed the wire's checks, and a name is short
            raise Invalid("", f"has no field {unknown[0][:64]!r}; it has {', '.join(self.fields) or 'none'}")
        for name in self._required:
            if v.get(name) is None:
                raise Invalid(name, "is required")
        for name in self.present:
            if name not in v:
                raise Invalid(name, "is required (null where it may be)")
        for name, schema in self.fields.items():
            if name in v:
                _within(schema, v[name], name)

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Free:
    """Any object: a harness's own payload (a tool's input), which the method reads key by key
    and checks where it does (the line is already strict I-JSON)."""
    nullable: bool = False

    def validate(self, v) -> None:
        if not isinstance(v, dict):
            raise Invalid("", "must be an object")

    def describe(self) -> str:
        return "an object"


@dataclass(frozen=True)
class Tagged:
    """An object whose field `tag` names its kind, each kind with its own fields."""
    tag: str
    kinds: dict  # kind -> Obj (without the tag field)
    nullable: bool = False

    def validate(self, v) -> None:
        if not isinstance(v, dict):
            raise Invalid("", f"must be {self.describe()}")
        kind = v.get(self.tag)
        if not isinstance(kind, str) or kind not in self.kinds:
            raise Invalid(self.tag, "must be one of " + ", ".join(f'"{k}"' for k in self.kinds))
        o = self.kinds[kind]
        Obj({self.tag: Str(), **o.fields}, o.required, present=o.present).validate(v)

    def describe(self) -> str:
        return f"an object with {self.tag}"


def check(method: str, params: dict) -> None:
    """`invalid` unless params fit the method's schema."""
    try:
        SCHEMAS[method].validate(params)
    except Invalid as e:
        raise LoncaError("invalid", f"{method}: params.{e.where} {e.message}" if e.where
                         else f"{method}: params {e.message}") from None


# -- common shapes (seed 001, "Common shapes") --------------------------------------------------

def path_problem(path: str) -> str | None:
    """A path git can hold, by the one path validator (service/paths.py); the refusal names the
    path (escaped: repr keeps control characters and lone surrogates out of the answer)."""
    why = paths.path_problem(path)
    return f"is {path!r}, which {why}" if why else None


def agent_name_problem(name: str) -> str | None:
    """An agent's name becomes the author of its commits: no control character, line or paragraph
    separator, < or > (git refuses those in an author), and more than the punctuation git trims
    from a name's ends."""
    bad = [ch for ch in name if ch in "<>" or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")]
    if bad:
        return f"must be a name git can take as an author ({bad[0]!r} is not allowed)"
    if not name.strip(_GIT_NAME_CRUD):
        return "must be a name git can take as an author, not only punctuation or spaces"
    return None


# what libgit2 trims from both ends of a signature's name
_GIT_NAME_CRUD = "".join(map(chr, range(33))) + ".,:;<>\"\\'"


def _absolute(path: str) -> str | None:
    return None if path.startswith("/") and "\x00" not in path else "must be an absolute path"


NAME = Str(REPO_NAME_MAX, 1, r"[A-Za-z0-9._-]+", what="letters, digits, '.', '_' and '-', at most 64")
GIT_ID = Str(40, 40, r"[0-9a-f]{40}", what="a git object id (40 lowercase hex digits)")
CHANGE_ID = Str(32, 32, r"[k-z]{32}", what="a change id (32 letters k-z)")
TIME = Int(0, 2**53 - 1)
TEXT = Str(TEXT_MAX)
LABEL = Str(NAME_MAX)
PATH = Str(4 * paths.PATH_MAX, 0, check=path_problem)  # paths counts bytes and says "empty"
AGENT = Str(NAME_MAX, 1, check=agent_name_problem)
SYMBOL = Str(1024, 1)
STRINGS = Arr(Str(4096))
HEX = Str(1 << 20, 0, r"[0-9a-fA-F]*", what="hex digits")

HUMAN_KEY = Obj({"alg": Str(32, 1), "public": Str(1024, 1, what="lowercase hex")}, frozenset({"alg", "public"}),
                what='a human key {"alg", "public"}')
# Types only: a bad nonce or a malformed signature is the seed's bad_nonce / bad_human_signature.
SIGNATURE = Obj({"human": LABEL, "nonce": Str(1024), "issued_ms": Int(), "sig": Str(1 << 20)},
                what='a human signature {"human", "nonce", "issued_ms", "sig"}')
LEASE_ITEM = Obj({"symbol": SYMBOL, "kind": Str(enum=KINDS), "names": Arr(Str(NAME_MAX), nullable=True)},
                 frozenset({"symbol", "kind"}), what='a lease item {"symbol", "kind", "names"?}')
LEASE_ITEMS = Arr(LEASE_ITEM, 1000, 1)
# the seed's modes: paths.py says why a submodule can not be written
FILE_CHANGE = Obj({"path": PATH, "content_b64": Str(1 << 31, nullable=True, what="base64"),
                   "mode": Str(enum=("regular", "executable", "symlink", "submodule"), nullable=True)},
                  frozenset({"path"}), what='a file change {"path", "content_b64", "mode"}')
FILES = Arr(FILE_CHANGE, 100_000)
LOCAL_FILE = Obj({"path": PATH, "entry": Obj({"mode": Str(32, nullable=True), "blob": GIT_ID}, frozenset({"blob"}),
                                              nullable=True)},
                 frozenset({"path"}), what='a local file {"path", "entry"}')
WORKSPACE = Str(4096, 1, check=_absolute, what="the workspace's absolute path")
SCOPE = Obj({"paths": Arr(Str(4096, 1)), "symbols": Arr(SYMBOL, nullable=True), "ops": Arr(Str(32)),
             "max_files": Int(0, nullable=True), "max_lines": Int(0, nullable=True),
             "scratch": Arr(Str(4096, 1, check=_absolute), 8)},
            what='a scope {"paths", "symbols", "ops", "max_files", "max_lines", "scratch"}')
TESTS = Obj({k: Arr(Str(4096)) for k in ("added", "modified", "deleted", "skipped")},
            what='{"added", "modified", "deleted", "skipped"}')
CLAIM = Obj({"intent": TEXT, **{k: (TESTS if k == "tests" else Arr(Str(4096), 100_000)) for k in CLAIM_FIELDS},
             "revert_of": Str(32, 32, r"[k-z]{32}", nullable=True, what="a change id")},
            nullable=True, what="a claim")

BASE = Str(40, 40, r"[0-9a-f]{40}", nullable=True, what=GIT_ID.what)
HELD = Arr(FILE_CHANGE, 100_000, nullable=True)
# A signed op is logged as it was signed, so its scope names every field (null where the type
# allows) but scratch, which the seed makes optional; the session's record fills it (scope.full_scope).
SESSION_START = Obj({"session": NAME, "agent": AGENT, "model": Str(NAME_MAX, nullable=True),
                     "task": Str(TEXT_MAX, nullable=True),
                     "scope": Obj(SCOPE.fields, frozenset({"paths", "ops"}), what=SCOPE.what, present=SCOPE_FIELDS),
                     "expires_ms": TIME, "harness": Str(64, nullable=True),
                     "continues": Str(REPO_NAME_MAX, 1, r"[A-Za-z0-9._-]+", nullable=True, what=NAME.what),
                     "widen": Bool()},
                    frozenset({"session", "agent", "expires_ms", "scope"}))
REMOTE = Str(4096, 1, what="a remote: an absolute path, https://, ssh:// or user@host:path")
# The operations human.submit takes (human_methods.SUBMIT_OPS, key_methods; a test keeps both equal).
SUBMIT_OPS = Tagged("op", {
    "session.start": SESSION_START,
    "approve": Obj({"target_seq": Int(1), "note": Str(TEXT_MAX, nullable=True), "checks": Arr(Str(NAME_MAX), nullable=True)},
                   frozenset({"target_seq"})),
    "reject": Obj({"target_seq": Int(1), "reason": Str(TEXT_MAX)}, frozenset({"target_seq", "reason"})),
    # not in the seed: a reviewer's signed comment on a line or symbol of a pending change (docs/decisions.md)
    "comment": Obj({"target_seq": Int(1), "path": PATH, "line": Int(1, nullable=True), "symbol": Str(1024, 1, nullable=True),
                    "text": Str(TEXT_MAX), "request_changes": Bool()},
                   frozenset({"target_seq", "path", "text", "request_changes"}), present=("line", "symbol")),
    "policy.update": Obj({"policy": GIT_ID}, frozenset({"policy"})),
    "priority": Obj({"change": CHANGE_ID}, frozenset({"change"})),
    "human.enroll": Obj({"human": NAME, "key": HUMAN_KEY}, frozenset({"human", "key"})),
    "human.rotate": Obj({"human": NAME, "key": HUMAN_KEY}, frozenset({"human", "key"})),
    "human.recovery_key": Obj({"human": NAME, "key": HUMAN_KEY}, frozenset({"human", "key"})),
    "human.recover": Obj({"human": NAME, "key": HUMAN_KEY}, frozenset({"human", "key"})),
    "human.revoke": Obj({"human": NAME, "reason": TEXT}, frozenset({"human", "reason"})),
    "daemon.rotate": Obj({"key": HEX}, frozenset({"key"})),
    "daemon.recover": Obj({"key": HEX, "recover": Obj({"human": NAME, "key": HUMAN_KEY}, frozenset({"human", "key"}))},
                          frozenset({"key"})),
    "cap.revoke": Obj({"session": NAME, "reason": TEXT}, frozenset({"session", "reason"})),
    "freeze": Obj({"reason": TEXT}, frozenset({"reason"})),
    "unfreeze": Obj({"reason": TEXT}, frozenset({"reason"})),
    "redact": Obj({"blob": GIT_ID, "reason": TEXT}, frozenset({"blob", "reason"})),
    "import.external": Obj({"remote": REMOTE, "commit": GIT_ID, "trunk_before": GIT_ID},
                           frozenset({"remote", "commit", "trunk_before"})),
    "bridge.push": Obj({"remote": REMOTE, "oplog_seq": Int(1), "oplog_hash": HEX},
                       frozenset({"remote", "oplog_seq", "oplog_hash"})),
    # a human's own change, as human.prepare_change wrote it (human_change_methods)
    "change.propose": Obj({"change": CHANGE_ID, "commit": GIT_ID, "base": GIT_ID,
                           "claim": Obj(CLAIM.fields, what=CLAIM.what)},
                          frozenset({"change", "commit", "base", "claim"})),
})
REPO_INIT_OP = Tagged("op", {"repo.init": Obj(
    {"repo": NAME, "daemon_key": HEX, "human": NAME, "human_key": HUMAN_KEY, "policy": GIT_ID, "trunk": GIT_ID,
     "profile": Str(enum=("cooperative", "hardened"))},
    frozenset({"repo", "daemon_key", "human", "human_key", "policy", "trunk"}))})
MESSAGE = Tagged("type", {
    "claim": Obj({"symbols": Arr(SYMBOL), "reason": TEXT}),
    "yield": Obj({"set": NAME, "to": Str(NAME_MAX, nullable=True)}),
    "counter": Obj({"note": TEXT}),
    "accept": Obj({}),
    "decline": Obj({"note": TEXT}),
})


def params(fields: dict | None = None, required=()) -> Obj:
    return Obj(fields or {}, frozenset(required), what="an object ({} when the method takes none)")


NONE = params()

SCHEMAS: dict[str, Obj] = {
    "ping": NONE,
    "whoami": NONE,
    "repo.list": NONE,
    # lists (an addition to the seed): only these of status's lists; null or absent, all of them
    "status": params({"lists": Arr(Str(enum=STATUS_LISTS), len(STATUS_LISTS), nullable=True)}),
    "inbox": NONE,
    "human.logout": NONE,
    "daemon.prepare_rotate": NONE,
    "session.heartbeat": NONE,
    "session.rotate": NONE,
    "human.login": params({"sig": SIGNATURE, "ttl_ms": Int(nullable=True)}, ["sig"]),
    "repo.prepare_init": params({"repo": NAME, "human": NAME, "human_key": HUMAN_KEY,
                                 "import_from": Str(4096, 1, nullable=True), "branch": Str(255, 1, nullable=True),
                                 "profile": Str(enum=("cooperative", "hardened"), nullable=True),
                                 "without_presence": Bool()}, ["repo", "human", "human_key"]),
    "repo.init": params({"op": REPO_INIT_OP, "sig": SIGNATURE}, ["op", "sig"]),
    "human.submit": params({"op": SUBMIT_OPS, "sig": SIGNATURE, "workspace": Str(4096, 1, nullable=True, check=_absolute)},
                           ["op", "sig"]),
    "repo.backup": NONE,
    "repo.restore": params({"repo": NAME, "from": REMOTE}, ["repo", "from"]),
    "human.prepare_import": params({"remote": REMOTE, "branch": Str(255, 1, nullable=True)}, ["remote"]),
    "human.prepare_push": params({"remote": REMOTE}, ["remote"]),
    "human.prepare_change": params({"base": GIT_ID, "files": FILES, "change": Str(32, 32, r"[k-z]{32}", nullable=True,
                                                                                  what=CHANGE_ID.what),
                                    "author": Str(200, 1), "intent": TEXT,
                                    "revert_of": Str(32, 32, r"[k-z]{32}", nullable=True, what=CHANGE_ID.what)},
                                   ["base", "files", "author", "intent"]),
    "human.prepare_policy": params({"config": Str(1 << 20), "policy": Str(1 << 20, nullable=True)}, ["config"]),
    "log": params({"from": Int(1), "limit": Int(1, nullable=True), "wait_ms": Int(0, nullable=True)}, ["from"]),
    "tree": params({"commit": GIT_ID, "with_content": Bool(), "paths": Arr(PATH, 100_000, nullable=True)}, ["commit"]),
    "blobs": params({"commit": GIT_ID, "paths": Arr(PATH, 100_000)}, ["commit", "paths"]),
    "symbols": params({"path": PATH, "commit": Str(40, 40, r"[0-9a-f]{40}", nullable=True, what=GIT_ID.what)}, ["path"]),
    "change.get": params({"change": CHANGE_ID}, ["change"]),
    "change.resolve": params({"prefix": Str(32, 4, r"[k-z]+", what="4 to 32 letters k-z")}, ["prefix"]),
    "change.diff": params({"change": CHANGE_ID, "format": Str(enum=("unified",), nullable=True)}, ["change"]),
    "change.withdraw": params({"change": CHANGE_ID}, ["change"]),
    "change.propose": params({"change": Str(32, 32, r"[k-z]{32}", nullable=True, what=CHANGE_ID.what),
                              "base": GIT_ID, "files": FILES, "claim": CLAIM}, ["base", "files"]),
    "facts.preview": params({"base": GIT_ID, "files": FILES}, ["base", "files"]),
    "trunk.merge": params({"base": GIT_ID, "files": FILES}, ["base", "files"]),
    "trunk.bundle": params({"have": Arr(GIT_ID, 10_000)}),
    "trunk.distance": params({"base": GIT_ID}, ["base"]),
    "lease.acquire": params({"set": Str(REPO_NAME_MAX, 1, r"[A-Za-z0-9._-]+", nullable=True, what=NAME.what),
                             "items": LEASE_ITEMS, "intent": Str(TEXT_MAX, nullable=True), "ttl_ms": Int(1, nullable=True)},
                            ["items"]),
    "lease.release": params({"set": NAME}, ["set"]),
    "lease.renew": params({"set": NAME, "ttl_ms": Int(1, nullable=True)}, ["set"]),
    "lease.interest": params({"items": LEASE_ITEMS, "intent": Str(TEXT_MAX, nullable=True)}, ["items"]),
    "events": params({"from": Int(0, nullable=True)}),
    "negotiate": params({"thread": Str(128, 1, r"[A-Za-z0-9._:-]+", what="1 to 128 letters, digits and . _ : -"),
                         "to_session": NAME, "message": MESSAGE}, ["thread", "to_session", "message"]),
    "cap.attenuate": params({"agent": AGENT, "scope": SCOPE, "expires_ms": TIME,
                             "leases": Arr(NAME, 1000, nullable=True)}, ["agent", "scope", "expires_ms"]),
    "session.end": params({"files": Arr(LOCAL_FILE, 100_000, nullable=True)}),
    "security.events": params({"since_ms": Int(nullable=True)}),
    "queue.running": params({}),
    "queue.run": params({}),
    # base and files, which the seed does not name, are the write tool's files as the workspace
    # holds them: the seed counts hook.event and hook.input among the methods that carry files
    # (docs/decisions.md, "hook.event's params and the seed"); an unknown harness is the method's deny
    "hook.event": params({"hook_event_name": Str(enum=("PreToolUse", "PostToolUse")), "tool_name": Str(256, nullable=True),
                          "tool_input": Free(nullable=True), "cwd": Str(4096, nullable=True), "workspace": WORKSPACE,
                          "harness": Str(64, 1, nullable=True), "base": BASE, "files": HELD},
                         ["hook_event_name", "workspace"]),
    "hook.input": params({"harness": Str(64, 1), "input": Free(), "workspace": WORKSPACE, "base": BASE, "files": HELD},
                         ["harness", "input", "workspace"]),
    "hook.bind": params({"harness": Str(64, 1), "harness_session": Str(256, 1), "sudo_without_password": Bool(),
                         "workspace": Str(4096, 1, nullable=True, check=_absolute)},
                        ["harness", "harness_session", "sudo_without_password"]),
    "hook.stop": params({"harness": Str(64, 1), "files": Arr(LOCAL_FILE, 100_000)}, ["harness", "files"]),
    "mcp.call": params({"tool": Str(64, 1, r"[a-z0-9_]+", what="the name in tools/list: lowercase letters, digits and _")},
                       ["tool"]),
    "harness.setup": params({"harness": Str(64, 1)}, ["harness"]),
}
