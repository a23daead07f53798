"""policy.cedar: who may do what to which path, in Cedar, evaluated by cedarpy (docs/policy.md,
"policy.cedar"; the entity model is docs/decisions.md, "policy.cedar: the entity model").

A policy commit without policy.cedar decides nothing here (every request is allowed, as before
Cedar). With one, Cedar's own rule holds: a request is allowed when a permit applies and no forbid
does. It is parsed once per policy commit (Policy.cedar, cached with the rest of the policy by
Daemon.policy_of) and validated against SCHEMA, so a misspelt action or attribute is refused at
human.prepare_policy (`invalid`, naming the line) instead of never matching. A deny is logged as
a decision with reasons `policy_forbid:<policy>` (the forbids that applied, by their @id or
Cedar's policyN), `policy_no_permit` (no permit applied) or `policy_error:<policy>` (a forbid
could not be evaluated: counted as applying, so a broken forbid never lets a request through).
The seed has no reason code for a policy's deny ("everything else is a policy or key-management
reason; show it"): these are those.

Every attribute is read from the state the decision is made on, which replay rebuilds from the
log, and the policy commit is named in the log (policy.update): the same entries give the same
decisions."""
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

import cedarpy
from cedarpy.pst import ActionEq, ActionIn, ScopeAny, ScopeIs, Var

from .lease_model import split
from .presence import proves_presence
from .reducers import touched_paths

if TYPE_CHECKING:
    from .state import RepoState

MAX_CEDAR_BYTES = 256 * 1024
NS = "Lonca"
# The operations policy.cedar decides, by who does them. A path action is asked once per path it
# touches (its resource is a Path, else the Repo). Left out on purpose: policy.update (a policy
# that forbade its own replacement would lock every human out for good) and the key and daemon
# operations, which the key rules decide.
HUMAN_ACTIONS = ("approve", "reject", "comment", "priority", "change.propose", "session.start", "cap.revoke",
                 "freeze", "unfreeze", "redact", "bridge.push", "import.external")
PATH_ACTIONS = ("approve", "reject", "comment", "priority", "change.propose", "lease.acquire", "lease.interest")

SCHEMA = """
namespace Lonca {
  type Context = {"repo": String, "change": String, "kind": String, "symbol": String};
  entity Human = {"name": String, "person": String, "key": String, "presence": Bool};
  entity Session = {"agent": String, "model": String, "harness": String, "level": String, "tainted": Bool};
  entity Path = {"path": String};
  entity Repo = {"name": String};
  action "approve", "reject", "comment", "priority" appliesTo {
    principal: [Human], resource: [Path, Repo], context: Context };
  action "change.propose" appliesTo { principal: [Human, Session], resource: [Path], context: Context };
  action "lease.acquire", "lease.interest" appliesTo { principal: [Session], resource: [Path], context: Context };
  action "session.start", "cap.revoke", "freeze", "unfreeze", "redact", "bridge.push", "import.external" appliesTo {
    principal: [Human], resource: [Repo], context: Context };
}
"""
_SCHEMA = cedarpy.Schema.from_str(SCHEMA)
_EOF = "unexpected end of input"


class CedarError(ValueError):
    pass


@dataclass(frozen=True)
class Cedar:
    """A parsed policy.cedar: the policy set and the name each policy is reported by."""
    policies: cedarpy.PolicySet
    names: dict[str, str]  # Cedar's id (policy0 …) -> its @id annotation, else that id
    forbids: frozenset[str]  # Cedar's ids of the forbid policies
    open_actions: frozenset[str]  # actions it allows whatever is asked, without evaluating (_open_actions)
    path_free: frozenset[str]  # path actions no policy tells paths apart for: asked once (_path_free)


def _lines(text: str, upto: int) -> str:
    return "\n".join(text.split("\n")[:upto])


def _parse_error_line(text: str, n_lines: int) -> int:
    """The first line at which the text stops parsing for a reason other than ending too soon:
    a prefix of a policy set that ends inside a policy is `unexpected end of input`, one that
    holds the fault is anything else. Binary search: a prefix holding the fault keeps it."""
    lo, hi = 1, n_lines
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            cedarpy.PolicySet.from_str(_lines(text, mid))
            faulty = False
        except ValueError as e:
            faulty = str(e) != _EOF
        if faulty:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _policy_lines(text: str, index: int) -> tuple[int, int]:
    """The lines (first, last) of the policy Cedar calls policy<index>, the index-th of the file:
    the lines are read one policy at a time, each chunk parsed alone until it holds a whole
    policy (a line may end one policy and start the next: then the chunk holds both)."""
    lines, start, seen = text.split("\n"), 0, 0
    for end in range(1, len(lines) + 1):
        try:
            found = len(cedarpy.PolicySet.from_str("\n".join(lines[start:end])).to_pst().static_policies)
        except ValueError:
            continue
        if found and seen + found > index:
            return start + 1, end
        if found:
            seen, start = seen + found, end
    return start + 1, len(lines)


def parse(text: str) -> Cedar:
    """A Cedar from policy.cedar text; CedarError with a message naming the line otherwise."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise CedarError(f"policy.cedar is not UTF-8 text: a lone surrogate at offset {e.start}") from None
    if size > MAX_CEDAR_BYTES:
        raise CedarError(f"policy.cedar is over {MAX_CEDAR_BYTES} bytes; keep the policy short")
    try:
        policies = cedarpy.PolicySet.from_str(text)
    except ValueError as e:
        # a policy left open runs to the end of the file: its last line with text is where it stops
        line = len(text.rstrip().split("\n")) if str(e) == _EOF else _parse_error_line(text, text.count("\n") + 1)
        raise CedarError(f"policy.cedar line {line}: {e} (docs/policy.md, \"policy.cedar\")") from None
    static = policies.to_pst().static_policies
    if policies.to_pst().templates:
        raise CedarError("policy.cedar: templates (?principal, ?resource) are not linked by Lonca; write each policy whole")
    checked = cedarpy.validate_policies(text, _SCHEMA)
    if not checked.validation_passed:
        err = checked.errors[0]
        pid = err.policy_id
        where = "policy"
        if pid.startswith("policy") and pid[6:].isdigit():  # Cedar's own id: policy<n>, the nth in the file
            first, last = _policy_lines(text, int(pid[6:]))
            where = f"line {first}" if first == last else f"lines {first}-{last}"
        raise CedarError(f"policy.cedar {where}: {err.error} (the entities, actions and attributes Lonca gives "
                         "are in docs/policy.md, \"policy.cedar\")")
    names = {pid: str(p.annotations.get("id") or pid) for pid, p in static.items()}
    forbids = frozenset(pid for pid, p in static.items() if p.effect == "forbid")
    return Cedar(policies, names, forbids, _open_actions(static, forbids), _path_free(static))


def _may_apply(policy, action: str) -> bool:
    scope = policy.action
    if isinstance(scope, ActionEq):
        return scope.entity.id == action
    if isinstance(scope, ActionIn):
        return any(e.id == action for e in scope.entities)
    return True


def _reads_resource(node) -> bool:
    """Whether a condition reads `resource` anywhere (the PST is dataclasses and tuples)."""
    if isinstance(node, Var):
        return node.name == "resource"
    if isinstance(node, tuple):
        return any(_reads_resource(n) for n in node)
    if dataclasses.is_dataclass(node):
        return any(_reads_resource(getattr(node, f.name)) for f in dataclasses.fields(node))
    return False


def _path_free(static: dict) -> frozenset[str]:
    """The path actions whose every policy that may apply is blind to which path: its resource
    scope is any resource or any Path, and no condition reads `resource`. Every path then gets the
    same answer, so one path is asked for all (an approval rule on the human alone costs one
    request, not one a file). Lease actions are left out: their context differs by item."""
    return frozenset(a for a in ("approve", "reject", "comment", "priority", "change.propose")
                     if all(isinstance(p.resource, (ScopeAny, ScopeIs)) and not _reads_resource(p.clauses)
                            for p in static.values() if _may_apply(p, a)))


def _open_actions(static: dict, forbids: frozenset[str]) -> frozenset[str]:
    """The actions Cedar would allow on any request: a permit of everyone, every action and every
    resource with no condition applies, and no forbid names the action (by ==, or in a list: Lonca's
    actions belong to no group, which SCHEMA holds to, so `in` names just those). A request costs
    about 40 us a path in cedarpy (docs/decisions.md, "policy.cedar: the cost"); the usual policy,
    everything but a few forbids, then costs nothing for the actions it does not mention."""
    everything = any(p.effect == "permit" and not p.clauses and all(isinstance(s, ScopeAny) for s in (p.principal, p.action, p.resource))
                     for p in static.values())
    if not everything:
        return frozenset()
    return frozenset(a for a in HUMAN_ACTIONS + PATH_ACTIONS if not any(_may_apply(static[pid], a) for pid in forbids))


@dataclass(frozen=True)
class Unreadable:
    """policy.cedar of an imported trunk that does not parse: every request it would decide is
    denied (policy_unreadable) until a human sends one that does; the policy is never dropped."""
    problem: str


def problem(cedar: "Cedar | Unreadable | None") -> str | None:
    """Why the policy.cedar in force denies all it decides (status.policy_problem, lonca doctor)."""
    if not isinstance(cedar, Unreadable):
        return None
    return f"{cedar.problem}; what it decides is denied (policy_unreadable) until a human sends one that parses"


def load(text: str | None) -> "Cedar | Unreadable | None":
    """What a policy commit's policy.cedar decides: None (nothing) when there is none or it holds
    no policy (only comments: Cedar would deny everything for want of a permit, which a blank
    file never means), an Unreadable when it does not parse."""
    if text is None:
        return None
    try:
        cedar = parse(text)
    except CedarError as e:
        return Unreadable(str(e))
    return cedar if cedar.names else None


def _uid(kind: str, name: str) -> dict:
    return {"type": f"{NS}::{kind}", "id": name}


def human_entity(rs: "RepoState", name: str) -> dict:
    key = rs.humans.get(name) or {}
    return {"uid": _uid("Human", name), "parents": [],
            "attrs": {"name": name, "person": rs.principal(name), "key": key.get("alg", ""),
                      "presence": bool(key) and proves_presence(key)}}


def session_entity(rs: "RepoState", session: str) -> dict:
    s = rs.sessions[session]
    return {"uid": _uid("Session", session), "parents": [],
            "attrs": {"agent": s.agent, "model": s.model or "", "harness": s.harness or "", "level": s.level,
                      "tainted": s.taint is not None}}


def decide(rs: "RepoState", principal: dict, action: str, paths: Iterable[str] = (), *, change: str = "",
           items: Iterable[dict] = ()) -> list[str]:
    """The reasons policy.cedar denies `principal` (an entity of human_entity or session_entity)
    the action, on each path (PATH_ACTIONS) or on the repository; [] when it allows it or the
    policy has no policy.cedar. `items`, lease items instead of paths: asked on each item's
    path, with its kind and symbol in the context."""
    cedar = rs.policy.cedar
    if cedar is None:
        return []
    if isinstance(cedar, Unreadable):
        return ["policy_unreadable"]
    if action in cedar.open_actions:
        return []
    repo = {"uid": _uid("Repo", rs.name), "parents": [], "attrs": {"name": rs.name}}
    entities = [principal, repo]
    requests = []
    targets: list[tuple[str | None, str, str]] = [(p, "", "") for p in sorted(set(paths))]
    if action in cedar.path_free:
        targets = targets[:1]
    targets += [(split(it["symbol"])[0], it["kind"], it["symbol"]) for it in items]
    seen: set[str] = set()
    for path, kind, symbol in targets if action in PATH_ACTIONS and targets else [(None, "", "")]:
        resource = repo["uid"]
        if path is not None:
            resource = _uid("Path", path)
            if path not in seen:
                seen.add(path)
                entities.append({"uid": resource, "parents": [], "attrs": {"path": path}})
        requests.append({"principal": principal["uid"], "action": _uid("Action", action), "resource": resource,
                         "context": {"repo": rs.name, "change": change, "kind": kind, "symbol": symbol}})
    reasons: list[str] = []
    for result in cedarpy.is_authorized_batch(requests, cedar.policies, entities):
        diag = result.diagnostics
        failed = [e.split("`")[1] if "`" in e else "" for e in diag.errors]
        reasons += [f"policy_error:{cedar.names.get(p, p)}" for p in failed if p in cedar.forbids]
        if result.decision == cedarpy.Decision.Deny:
            applied = [f"policy_forbid:{cedar.names.get(p, p)}" for p in diag.reasons]
            reasons += applied or ["policy_no_permit"]  # no forbid applied: no permit did (one that failed does not)
    return list(dict.fromkeys(reasons))


def human_reasons(rs: "RepoState", human: str, op: dict, facts: dict | None) -> list[str]:
    """Why policy.cedar denies a human's signed operation (HUMAN_ACTIONS; [] for the rest). An
    approval or rejection is asked on each path of the pending change (on the repository for a
    pending operation that is no change), a comment on the file it is on, a priority on each
    path of its change, a human's own change.propose on each path its facts touch."""
    kind = op["op"]
    if rs.policy.cedar is None or kind not in HUMAN_ACTIONS:
        return []
    change = ""
    if kind in ("approve", "reject", "comment"):
        pending = rs.pending.get(op["target_seq"])
        change = pending.change or "" if pending else ""
    elif kind in ("priority", "change.propose"):
        change = op["change"]
    rec = rs.change(change) if change else None
    paths = touched_paths(facts or {}) if kind == "change.propose" else rec.paths if rec else []
    if kind == "comment" and rec is not None:
        paths = [op["path"]]  # a comment is on one file of the change (decide_comment checked which)
    return decide(rs, human_entity(rs, human), kind, paths, change=change)
