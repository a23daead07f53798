"""The policy in force: `lonca.toml` of the repository's policy commit, over these defaults
(documented in docs/policy.md). A file that does not parse leaves the defaults in force and
`status.policy_checks` / `runs` null, as the seed says for a policy that can not be read."""
import fnmatch
import tomllib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Policy:
    # [leases]
    max_ttl_ms: int = 60 * 60_000
    shared: bool = False
    unparsed_files: str = "optimistic"  # or "strict": unparsed files need a path#<file> lease
    max_hold_ms: int = 120 * 60_000
    interest_block_ms: int = 30_000
    reservation_ms: int = 60_000
    heartbeat_timeout_ms: int = 90_000
    lease_hold_limit_sets: int = 64  # lease sets one session may hold at once
    # [review]
    critical_paths: tuple[str, ...] = ("lonca.toml",)
    agent_changes: str = "allow"  # or "human": every agent change waits for a human
    approvals_required: int = 1
    case_twins: bool = False  # a new path may differ from another only in case (service/paths.py)
    # [verification]
    build: tuple[str, ...] | None = None
    tests: tuple[str, ...] | None = None
    extended: tuple[str, ...] | None = None
    checks: dict = field(default_factory=dict)  # name -> argv
    checks_by_path: dict = field(default_factory=dict)  # glob -> [name]
    required: bool = False
    check_timeout_s: int = 600
    check_env: tuple[str, ...] = ()
    batch_size: int = 16  # one verification for up to 16 changes; a failure costs log2(16) more
    # [sessions]
    ops_per_minute: int = 600
    session_max_ttl_ms: int = 7 * 24 * 3600_000
    # [quota] (0: none)
    session_seconds: int = 0
    day_seconds: int = 0
    # [queue]
    max_behind: int = 1000  # a base more integrations behind trunk than this is stale_trunk
    readable: bool = True

    @property
    def check_names(self) -> list[str] | None:
        return sorted(self.checks) if self.readable else None

    def critical(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, g) for g in self.critical_paths)

    def runs(self, change) -> list[str] | None:
        """What the queue runs for a change (a ChangeRec: its paths, facts and asked checks):
        build, tests, extended, then each named check owed."""
        if not self.readable:
            return None
        # required: build and tests are owed even without a command (then verification_missing)
        out = [n for n, argv in (("build", self.build), ("tests", self.tests)) if argv or self.required]
        if change.facts.get("signature_changes") and self.extended:
            out.append("extended")
        named = set(change.checks)
        for glob, names in self.checks_by_path.items():
            if any(fnmatch.fnmatchcase(p, glob) for p in change.paths):
                named.update(names)
        return out + sorted(n for n in named if n in self.checks)

    def argv(self, check: str) -> list[str] | None:
        if check in ("build", "tests", "extended"):
            v = getattr(self, check)
            return list(v) if v else None
        return list(self.checks[check]) if check in self.checks else None


DEFAULT = Policy()

# lonca.toml key -> (Policy field, converter)
_KEYS = {
    ("leases", "max_ttl_minutes"): ("max_ttl_ms", lambda v: int(v) * 60_000),
    ("leases", "shared"): ("shared", bool),
    ("leases", "unparsed_files"): ("unparsed_files", str),
    ("leases", "max_hold_minutes"): ("max_hold_ms", lambda v: int(v) * 60_000),
    ("leases", "interest_block_ms"): ("interest_block_ms", int),
    ("leases", "reservation_ms"): ("reservation_ms", int),
    ("leases", "timeout_ms"): ("heartbeat_timeout_ms", int),
    ("leases", "max_sets"): ("lease_hold_limit_sets", int),
    ("review", "critical_paths"): ("critical_paths", lambda v: tuple(map(str, v))),
    ("review", "agent_changes"): ("agent_changes", str),
    ("review", "approvals"): ("approvals_required", int),
    ("review", "case_twins"): ("case_twins", bool),
    ("verification", "build"): ("build", lambda v: tuple(map(str, v))),
    ("verification", "tests"): ("tests", lambda v: tuple(map(str, v))),
    ("verification", "extended"): ("extended", lambda v: tuple(map(str, v))),
    ("verification", "checks"): ("checks", lambda v: {str(k): tuple(map(str, a)) for k, a in v.items()}),
    ("verification", "checks_by_path"): ("checks_by_path", lambda v: {str(k): list(map(str, a)) for k, a in v.items()}),
    ("verification", "required"): ("required", bool),
    ("verification", "timeout_s"): ("check_timeout_s", int),
    ("verification", "env"): ("check_env", lambda v: tuple(map(str, v))),
    ("verification", "batch_size"): ("batch_size", int),
    ("sessions", "ops_per_minute"): ("ops_per_minute", int),
    ("sessions", "max_ttl_hours"): ("session_max_ttl_ms", lambda v: int(v) * 3600_000),
    ("quota", "session_seconds"): ("session_seconds", int),
    ("quota", "day_seconds"): ("day_seconds", int),
    ("queue", "max_behind"): ("max_behind", int),
}


class PolicyError(ValueError):
    pass


def parse(text: str) -> Policy:
    """A Policy from lonca.toml text; PolicyError names what does not fit."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError(f"lonca.toml does not parse: {e}") from None
    values = {}
    for section, table in doc.items():
        if not isinstance(table, dict):
            raise PolicyError(f"lonca.toml: {section} is not a table")
        for key, value in table.items():
            target = _KEYS.get((section, key))
            if target is None:
                raise PolicyError(f"lonca.toml: [{section}] {key} is not a setting Lonca knows")
            try:
                values[target[0]] = target[1](value)
            except (TypeError, ValueError, AttributeError):
                raise PolicyError(f"lonca.toml: [{section}] {key} has the wrong type") from None
    if values.get("unparsed_files", "optimistic") not in ("optimistic", "strict"):
        raise PolicyError('lonca.toml: [leases] unparsed_files is "optimistic" or "strict"')
    if values.get("agent_changes", "allow") not in ("allow", "human"):
        raise PolicyError('lonca.toml: [review] agent_changes is "allow" or "human"')
    for name in values.get("checks", {}):
        if name in ("build", "tests", "extended") or not name.replace("-", "").replace("_", "").isalnum():
            raise PolicyError(f"lonca.toml: {name!r} can not name a check")
    return Policy(**values)


def load(text: str | None) -> Policy:
    """The policy of a commit's lonca.toml (None: the file is absent, the defaults hold)."""
    if text is None:
        return DEFAULT
    try:
        return parse(text)
    except PolicyError:
        return Policy(readable=False)

