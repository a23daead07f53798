"""The policy in force: `lonca.toml` of the repository's policy commit, over these defaults
(documented in docs/policy.md; tests/test_policy.py keeps the two equal).

Parsing is strict: every key's type is checked as written (`shared = "false"` is not a boolean,
`batch_size = 2.9` not an integer, `tests = "make test"` not an argv), an unknown table or key is
refused, and the error names the key. `human.prepare_policy` and `policy.update` answer such an
error as `invalid`, so a bad file is never stored. A file already on trunk when a repository is
imported can not be refused that way: it leaves the defaults in force, `status.policy_checks` and
`runs` null (as the seed says for a policy that can not be read) and the error in
`status.policy_problem`, and `repo.prepare_init` warns of it."""
import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from lonca.harness import PROFILES

from .globs import glob_match

LEVELS = ("unobserved", "hooks", "hooks_sandbox", "isolated")  # a session's observation levels, lowest first
PHASES = ("session_start", "input", "before_tool", "after_tool", "stop")  # the moments Lonca hooks (hook.input)
_HARNESS_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # as session.start names a harness, lowercase


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
    presence_required: bool = False  # human writes need a key that proves presence (a hardened profile always does)
    distinct_humans: tuple[str, ...] = ()  # names that count as a human of their own though another enrolled them
    checks_before_decision: bool = False  # a pending change's checks run on its own commit while it waits
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
    retries: int = 0  # a check that does not pass runs again up to this many times (flaky suites)
    # [sessions]
    ops_per_minute: int = 600
    session_max_ttl_ms: int = 7 * 24 * 3600_000
    stop_rounds: int = 1  # hook.stop sends an agent with unproposed changes back this many times
    required_level: str = "unobserved"  # a session below it: its proposals escalate unobserved_session
    # [harnesses.<name>]: a harness's profile, name -> {field: value} of HARNESS_SETTINGS
    harnesses: dict = field(default_factory=dict)
    # [quota] (0: none)
    session_seconds: int = 0
    day_seconds: int = 0
    # [queue]
    max_behind: int = 1000  # a base more integrations behind trunk than this is stale_trunk
    runners: int = 1  # checks run at once; above 1, independent lanes are verified in parallel
    runner: str = "embedded"  # or "celery": checks run on `lonca runner` processes through the broker
    speculate: bool = True  # a failing run's prefixes are verified as many at once as runners are free
    rounds: str = "screened"  # under speculate: one wave a round screening groups ("pipelined": rounds in flight)
    problem: str | None = None  # why lonca.toml could not be read (then these are the defaults)
    # policy.cedar of the same commit, parsed once (service/cedar_policy.py: a Cedar, an
    # Unreadable, or None when the commit has none); not a key of lonca.toml
    cedar: Any = field(default=None, compare=False)

    @property
    def readable(self) -> bool:
        return self.problem is None

    @property
    def check_names(self) -> list[str] | None:
        return sorted(self.checks) if self.readable else None

    def level_required(self, harness: str | None) -> str:
        """The level a session started with this harness must stand at: its profile's
        required_level, else [sessions] required_level."""
        return self.harnesses.get(harness or "", {}).get("required_level", self.required_level)

    def profile(self, harness: str | None) -> dict | None:
        """The harness's profile (seed 001, hook.input: "the harness's profile from the policy"):
        the built-in one of lonca/harness.py with the keys [harnesses.<name>] gives over it, or the
        policy's alone for another harness (parse made sure it has events); None: no profile, the
        harness is unknown."""
        own = {k: v for k, v in self.harnesses.get(harness or "", {}).items() if k != "required_level"}
        base = PROFILES.get(harness or "")
        if base is None and "events" not in own:
            return None
        return {**(base or NO_PROFILE), **own}

    def critical(self, path: str) -> bool:
        return any(glob_match(g, path) for g in self.critical_paths)

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
            if any(glob_match(glob, p) for p in change.paths):
                named.update(names)
        return out + sorted(n for n in named if n in self.checks)

    def argv(self, check: str) -> list[str] | None:
        if check in ("build", "tests", "extended"):
            v = getattr(self, check)
            return list(v) if v else None
        return list(self.checks[check]) if check in self.checks else None


DEFAULT = Policy()
# what a profile of the policy leaves out, for a harness Lonca has no profile of: no tools judged,
# no MCP prefix (so no before-tool event of MCP tools), no context after a tool, no setup
NO_PROFILE = {"events": {}, "tool_prefix": "", "before_tool_mcp": False, "tool_context": False,
              "write_tools": {}, "read_tools": {}, "setup": None}
MAX_POLICY_BYTES = 1 << 20
RESERVED_CHECKS = ("build", "tests", "extended")
_CHECK_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_INT = 2 ** 53 - 1      # values reach canonical JSON (status) as integers


@dataclass(frozen=True)
class Setting:
    """One key of lonca.toml: where it goes in Policy and what it must be.

    kind: "bool"; "int" (not a boolean, at least `minimum`, times `scale` into the field);
    "choice" (one of `choices`); "argv" (a non-empty array of strings, no shell); "strings";
    "env" (variable names); "checks" (a table: check name -> argv); "check_globs" (a table:
    glob -> names of `checks`); a harness profile's "events" (a table: event -> one of PHASES),
    "tools" (a table: tool name -> the input key naming its path), "string" and "table" (any
    table, kept as written)."""
    table: str
    key: str
    field: str
    kind: str
    minimum: int = 0
    scale: int = 1
    choices: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"[{self.table}] {self.key}"

    @property
    def type_text(self) -> str:
        """The type as docs/policy.md words it."""
        if self.kind == "int":
            return f"integer ≥ {self.minimum}"
        if self.kind == "choice":
            return " or ".join(f'"{c}"' for c in self.choices)
        return _TYPE_TEXT[self.kind]

    def default(self) -> Any:
        """The default as lonca.toml writes it; None where the default is none."""
        value = getattr(DEFAULT, self.field)
        if value is None:
            return None
        if self.kind == "int":
            return value // self.scale
        if self.kind in ("argv", "strings", "env"):
            return list(value)
        if self.kind in ("checks", "check_globs"):
            return {k: list(v) for k, v in value.items()}
        return value

    def convert(self, value: Any, values: dict) -> Any:
        """The field's value; PolicyError naming the key when `value` does not fit."""
        kind = self.kind
        if kind == "bool" and type(value) is bool:
            return value
        if kind == "int" and type(value) is int:
            if value < self.minimum or value * self.scale > _MAX_INT:
                raise self.error(f"an integer from {self.minimum} to {_MAX_INT // self.scale}",
                                 value)
            return value * self.scale
        if kind == "choice" and value in self.choices:
            return value
        if kind == "argv" and _argv(value):
            return tuple(value)
        if kind == "strings" and _strings(value):
            return tuple(value)
        if kind == "env" and _strings(value) and all(_ENV_NAME.fullmatch(v) for v in value):
            return tuple(value)
        if kind == "checks" and isinstance(value, dict):
            for name, argv in value.items():
                if name in RESERVED_CHECKS or not _CHECK_NAME.fullmatch(name):
                    raise PolicyError(f"lonca.toml: {self.name}: {json.dumps(name)} can not name "
                                      "a check (letters, digits, - and _; not build, tests or "
                                      "extended, which have keys of their own)")
                if not _argv(argv):
                    raise self.error(_A["argv"], argv, f"{self.name}.{name}")
            return {k: tuple(v) for k, v in value.items()}
        if kind == "check_globs" and isinstance(value, dict):
            checks = values.get("checks", {})
            for glob, names in value.items():
                if not _strings(names):
                    raise self.error("an array of check names", names,
                                     f"{self.name}.{json.dumps(glob)}")
                unknown = [n for n in names if n not in checks]
                if unknown:
                    raise PolicyError(f"lonca.toml: {self.name}: {json.dumps(unknown[0])} is not "
                                      "a check of [verification] checks; define it there first")
            return {k: list(v) for k, v in value.items()}
        if kind == "string" and isinstance(value, str) and len(value) <= 256 and "\0" not in value:
            return value
        if kind == "table" and isinstance(value, dict):
            return value
        if kind in ("events", "tools") and isinstance(value, dict):
            for name, v in value.items():
                fits = v in PHASES if kind == "events" else isinstance(v, str) and 0 < len(v) <= 256
                if not fits or not 0 < len(name) <= 256:
                    raise self.error(_A[kind], {name: v}, f"{self.name}.{json.dumps(name)}")
            return dict(value)
        raise self.error(_A[kind] if kind in _A else self.type_text, value)

    def error(self, want: str, got: Any, name: str | None = None) -> "PolicyError":
        return PolicyError(f"lonca.toml: {name or self.name} must be {want}, got {_shown(got)}")


_TYPE_TEXT = {"bool": "boolean", "argv": "array of strings (argv)", "strings": "array of strings",
              "env": "array of variable names", "checks": "table: name = argv",
              "check_globs": "table: glob = array of check names", "events": "table: event = phase",
              "tools": "table: tool = input key", "string": "string", "table": "table"}
_A = {"bool": "true or false", "int": "an integer", "argv": "a non-empty array of strings (argv: "
      'the program, then each argument; no shell), as ["make", "test"]',
      "strings": "an array of strings", "env": "an array of environment variable names",
      "checks": "a table of check name = argv", "check_globs": 'a table of glob = ["check", …]',
      "events": "a table of the harness's event name = " + " or ".join(f'"{p}"' for p in PHASES),
      "tools": 'a table of tool name = the key of its input that names the path, as Edit = "file_path"',
      "string": "a string of at most 256 characters", "table": "a table"}

SETTINGS = (
    Setting("leases", "max_ttl_minutes", "max_ttl_ms", "int", 1, 60_000),
    Setting("leases", "shared", "shared", "bool"),
    Setting("leases", "unparsed_files", "unparsed_files", "choice",
            choices=("optimistic", "strict")),
    Setting("leases", "max_hold_minutes", "max_hold_ms", "int", 1, 60_000),
    Setting("leases", "interest_block_ms", "interest_block_ms", "int"),
    Setting("leases", "reservation_ms", "reservation_ms", "int"),
    Setting("leases", "timeout_ms", "heartbeat_timeout_ms", "int", 1),
    Setting("leases", "max_sets", "lease_hold_limit_sets", "int", 1),
    Setting("review", "critical_paths", "critical_paths", "strings"),
    Setting("review", "agent_changes", "agent_changes", "choice", choices=("allow", "human")),
    Setting("review", "approvals", "approvals_required", "int", 1),
    Setting("review", "case_twins", "case_twins", "bool"),
    Setting("review", "presence_required", "presence_required", "bool"),
    Setting("review", "distinct_humans", "distinct_humans", "strings"),
    Setting("review", "checks_before_decision", "checks_before_decision", "bool"),
    Setting("verification", "build", "build", "argv"),
    Setting("verification", "tests", "tests", "argv"),
    Setting("verification", "extended", "extended", "argv"),
    Setting("verification", "checks", "checks", "checks"),
    Setting("verification", "checks_by_path", "checks_by_path", "check_globs"),
    Setting("verification", "required", "required", "bool"),
    Setting("verification", "timeout_s", "check_timeout_s", "int", 1),
    Setting("verification", "env", "check_env", "env"),
    Setting("verification", "batch_size", "batch_size", "int", 1),
    Setting("verification", "retries", "retries", "int", 0),
    Setting("sessions", "ops_per_minute", "ops_per_minute", "int", 1),
    Setting("sessions", "max_ttl_hours", "session_max_ttl_ms", "int", 1, 3600_000),
    Setting("sessions", "stop_rounds", "stop_rounds", "int"),
    Setting("sessions", "required_level", "required_level", "choice", choices=LEVELS),
    Setting("quota", "session_seconds", "session_seconds", "int"),
    Setting("quota", "day_seconds", "day_seconds", "int"),
    Setting("queue", "max_behind", "max_behind", "int"),
    Setting("queue", "runners", "runners", "int", 1),
    Setting("queue", "runner", "runner", "choice", choices=("embedded", "celery")),
    Setting("queue", "speculate", "speculate", "bool"),
    Setting("queue", "rounds", "rounds", "choice", choices=("screened", "pipelined")),
)
_BY_KEY = {(s.table, s.key): s for s in SETTINGS}
TABLES = tuple(dict.fromkeys(s.table for s in SETTINGS))
# The keys of a harness's profile, `[harnesses.<name>]` (one table per harness the repository
# sets apart from the rest): required_level, which left out holds what [sessions] says for every
# harness; and how Lonca reads the harness's hooks (Policy.profile), each key over the built-in
# profile's, or for another harness over NO_PROFILE, once `events` names its events.
HARNESS_SETTINGS = (
    Setting("harnesses.<name>", "required_level", "required_level", "choice", choices=LEVELS),
    Setting("harnesses.<name>", "events", "events", "events"),
    Setting("harnesses.<name>", "before_tool_mcp", "before_tool_mcp", "bool"),
    Setting("harnesses.<name>", "tool_prefix", "tool_prefix", "string"),
    Setting("harnesses.<name>", "tool_context", "tool_context", "bool"),
    Setting("harnesses.<name>", "write_tools", "write_tools", "tools"),
    Setting("harnesses.<name>", "read_tools", "read_tools", "tools"),
    Setting("harnesses.<name>", "setup", "setup", "table"),
)
_HARNESS_KEYS = {s.key: s for s in HARNESS_SETTINGS}


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and "\0" not in v for v in value)


def _argv(value: Any) -> bool:
    return _strings(value) and bool(value) and bool(value[0])


def _shown(value: Any) -> str:
    """A value as lonca.toml writes it, cut short."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (str, list, dict)):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    return text if len(text) <= 80 else text[:77] + "…"


class PolicyError(ValueError):
    pass


def parse(text: str) -> Policy:
    """A Policy from lonca.toml text; PolicyError names what does not fit."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:     # a lone surrogate could be neither stored nor shown
        raise PolicyError(f"lonca.toml is not UTF-8 text: a lone surrogate at offset "
                          f"{e.start}") from None
    if size > MAX_POLICY_BYTES:
        raise PolicyError(f"lonca.toml is over {MAX_POLICY_BYTES} bytes; keep the policy short")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError(f"lonca.toml does not parse: {e}") from None
    except RecursionError:
        raise PolicyError("lonca.toml does not parse: arrays or tables nested too deep") from None
    tables = ", ".join(f"[{t}]" for t in TABLES) + ", [harnesses.<name>]"
    values: dict[str, Any] = {}
    for table, keys in doc.items():
        if not isinstance(keys, dict):
            raise PolicyError(f"lonca.toml: {table} is not a table; settings go in {tables}")
        if table == "harnesses":
            values["harnesses"] = _harness_profiles(keys)
        elif table not in TABLES:
            what = f"[{table}] {next(iter(keys))}" if keys else f"[{table}]"
            raise PolicyError(f"lonca.toml: {what} is not a setting Lonca knows: there is no table "
                              f"[{table}]; the tables are {tables} (docs/policy.md)")
    # in SETTINGS order, so checks_by_path sees the checks it names
    for setting in SETTINGS:
        keys = doc.get(setting.table, {})
        if setting.key in keys:
            values[setting.field] = setting.convert(keys[setting.key], values)
    for table, keys in doc.items():
        for key in keys if table != "harnesses" else ():
            if (table, key) not in _BY_KEY:
                known = ", ".join(s.key for s in SETTINGS if s.table == table)
                raise PolicyError(f"lonca.toml: [{table}] {key} is not a setting Lonca knows; "
                                  f"[{table}] has {known} (docs/policy.md)")
    return Policy(**values)


def _harness_profiles(doc: dict) -> dict:
    """[harnesses.<name>] tables: name -> {field: value}, each key checked as [sessions]' are."""
    out = {}
    for name, keys in doc.items():
        if not _HARNESS_NAME.fullmatch(name):
            raise PolicyError(f"lonca.toml: [harnesses.{_shown(name)}]: a harness is named as session start "
                              "--harness names it (lowercase letters, digits, - and _, at most 64)")
        if not isinstance(keys, dict):
            raise PolicyError(f"lonca.toml: [harnesses] {name} is not a harness's table; [harnesses] holds one "
                              "table per harness, [harnesses.<name>] (docs/policy.md)")
        profile = {}
        for key, value in keys.items():
            setting = _HARNESS_KEYS.get(key)
            if setting is None:
                known = ", ".join(_HARNESS_KEYS)
                raise PolicyError(f"lonca.toml: [harnesses.{name}] {key} is not a setting Lonca knows; "
                                  f"[harnesses.<name>] has {known} (docs/policy.md)")
            profile[setting.field] = replace(setting, table=f"harnesses.{name}").convert(value, {})
        out[name] = profile
        whole = Policy(harnesses={name: profile}).profile(name)
        if whole is None and set(profile) - {"required_level"}:
            raise PolicyError(f"lonca.toml: [harnesses.{name}] events is missing: Lonca has no profile of {name}, so "
                              "its table names the harness's events (docs/policy.md) before its other hook keys")
        if whole is not None and whole["before_tool_mcp"] and not whole["tool_prefix"]:
            raise PolicyError(f"lonca.toml: [harnesses.{name}] tool_prefix is missing: with before_tool_mcp = true "
                              "it says how the harness names the lonca MCP tools, as \"mcp__lonca__\"")
    return out


def load(text: str | None) -> Policy:
    """The policy of a commit's lonca.toml (None: the file is absent, the defaults hold). One
    that can not be read (an imported trunk's) holds the defaults and says why in `problem`."""
    if text is None:
        return DEFAULT
    try:
        return parse(text)
    except PolicyError as e:
        return Policy(problem=str(e))
