"""The agent tools `lonca mcp` serves and the Lonis provider hosts: one table, so both surfaces
offer the same verbs with the same input schemas (seed 001, "MCP tools"; seed 000, "The Provider
Model"). Each tool names what it does to the world truthfully: whether it changes something
(strict about unknown arguments), its determinism, side effects and cost."""
from dataclasses import dataclass
from typing import Callable

from lonca import workspace
from lonca.client import Unreachable
from lonca.mcp_args import check
from lonca.mcp_session import AgentSession
from lonca.output import Usage
from lonca.protocol import CLAIM_FIELDS, LoncaError

# daemon codes whose message may carry internals (git's stderr, an I/O error): shown generically
GENERIC = {"internal": "the daemon failed; try again", "git": "a git operation in the daemon failed",
           "integrity": "the daemon's log does not verify; tell a human"}

SESSION_OVER = "the session has ended or expired; start a new one (lonca session start)"


class ToolFailure(Exception):
    """What a tool call ends with when it does not return: a code, a message that says what to
    do, and extra fields (`expected`) for the caller."""

    def __init__(self, code: str, message: str, **extra):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra

    def to_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}, **self.extra}


@dataclass(frozen=True)
class Tool:
    name: str            # the MCP tool name
    namespace: str       # the Lonis id is lonca:<namespace>:<item>
    item: str
    description: str
    schema: dict
    changes: bool        # changes something: an unknown argument is refused, not ignored
    determinism: str
    side_effects: str
    cost: str
    run: Callable[[AgentSession, dict], dict]

    @property
    def tool_id(self) -> str:
        return f"lonca:{self.namespace}:{self.item}"


def _obj(props: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


STR, INT = {"type": "string"}, {"type": "integer", "minimum": 1}
STRS = {"type": "array", "items": {"type": "string"}}
LEASE_ITEMS = {"type": "array", "items": _obj({
    "symbol": {"type": "string", "description": "a symbol id from symbols or preview, e.g. app.py#Client.pay"},
    "kind": {"enum": ["edit", "insert", "rename", "shared"]},
    "names": STRS}, ("symbol", "kind"))}
INTENT = {"type": "string", "description": "what you are doing and why"}
CLAIM = _obj({**{f: STRS for f in CLAIM_FIELDS if f != "tests"},
              "tests": _obj({k: STRS for k in ("added", "modified", "deleted", "skipped")}),
              "revert_of": {"type": ["string", "null"]}})


def _status(s: AgentSession, a: dict) -> dict:
    return s.call("status")


def _symbols(s: AgentSession, a: dict) -> dict:
    return s.call("symbols", {"path": a["path"], "commit": a.get("commit")})


def _preview(s: AgentSession, a: dict) -> dict:
    files = workspace.local_changes(s.ws)
    if not files:
        raise Usage("no local changes to preview")
    return s.call("facts.preview", {"base": s.ws.base, "files": files})


def _lease_acquire(s: AgentSession, a: dict) -> dict:
    ttl = a.get("ttl_ms", 600_000)
    res = s.call("lease.acquire", {"set": a.get("set"), "items": a["items"], "intent": a["intent"], "ttl_ms": ttl})
    if res.get("set") and res["decision"]["outcome"] == "allow":
        s.remember_lease(res["set"], ttl)
    return res


def _lease_release(s: AgentSession, a: dict) -> dict:
    res = s.call("lease.release", {"set": a["set"]})
    s.forget_lease(a["set"])
    return res


def _lease_renew(s: AgentSession, a: dict) -> dict:
    res = s.call("lease.renew", {"set": a["set"], "ttl_ms": a.get("ttl_ms")})
    if res["decision"]["outcome"] == "allow":
        s.remember_lease(a["set"], a.get("ttl_ms"))
    return res


def _lease_interest(s: AgentSession, a: dict) -> dict:
    return s.call("lease.interest", {"items": a["items"], "intent": a["intent"]})


def _propose(s: AgentSession, a: dict) -> dict:
    ws = s.ws
    files = workspace.proposal_files(ws)
    claim = {**(a.get("claim") or {}), "intent": a["intent"]}
    untold = [f for f in CLAIM_FIELDS if f not in claim]
    if untold:  # what the agent does not claim is taken from the facts
        facts = s.call("facts.preview", {"base": ws.base, "files": files})["facts"]
        claim.update({f: facts[f] for f in untold})
    res = s.call("change.propose", {"change": None, "base": ws.base, "files": files, "claim": claim})
    out = {k: res.get(k) for k in ("change", "commit", "seq", "decision", "status", "details")}
    fields = [r.split(":", 1)[1] for r in res["decision"]["reasons"] if r.startswith("claim_mismatch:")]
    if fields:
        out["claim_mismatch"] = [{"field": f, "claimed": claim.get(f), "facts": res["facts"].get(f)} for f in fields]
    return out


def _withdraw(s: AgentSession, a: dict) -> dict:
    return s.call("change.withdraw", {"change": a["change"]})


def _sync(s: AgentSession, a: dict) -> dict:
    ws = s.ws
    return workspace.sync(ws, s.client, ws.agent_token())


def _events(s: AgentSession, a: dict) -> dict:
    return s.call("events", {"from": a.get("from")})


def _diff(s: AgentSession, a: dict) -> dict:
    return s.call("change.diff", {"change": a["change"]})


def _negotiate(s: AgentSession, a: dict) -> dict:
    return s.call("negotiate", {"thread": a["thread"], "to_session": a["to_session"], "message": a["message"]})


def _end(s: AgentSession, a: dict) -> dict:
    res = s.call("session.end", {"files": workspace.end_files(s.ws)})
    if res["decision"]["outcome"] == "allow":
        s.over.set()
    return res


TOOLS: list[Tool] = [
    Tool("status", "repo", "status",
         "The repository now: trunk, sessions, leases, changes and their status, pending reviews.",
         _obj({}), False, "nondeterministic", "read-only", "low", _status),
    Tool("symbols", "repo", "symbols",
         "The symbols of one file at trunk (or at commit): the ids to lease, with their kind and lines.",
         _obj({"path": STR, "commit": {"type": ["string", "null"]}}, ("path",)),
         False, "nondeterministic", "read-only", "low", _symbols),
    Tool("preview", "change", "preview",
         "The facts a proposal of the workspace's local changes would have, and the leases they need "
         "(acquire lists the free ones). Logs nothing.",
         _obj({}), False, "nondeterministic", "read-only", "medium", _preview),
    Tool("lease_acquire", "lease", "acquire",
         "Take a lease on symbols before editing them. Denied while another session holds one: read details.",
         _obj({"items": LEASE_ITEMS, "intent": INTENT, "ttl_ms": INT, "set": {"type": ["string", "null"]}},
              ("items", "intent")), True, "nondeterministic", "mutates-external", "low", _lease_acquire),
    Tool("lease_release", "lease", "release", "Release a lease set.",
         _obj({"set": STR}, ("set",)), True, "nondeterministic", "mutates-external", "low", _lease_release),
    Tool("lease_renew", "lease", "renew", "Renew a lease set for ttl_ms (default 600000).",
         _obj({"set": STR, "ttl_ms": INT}, ("set",)), True, "nondeterministic", "mutates-external", "low",
         _lease_renew),
    Tool("lease_interest", "lease", "interest",
         "Say you are waiting for symbols another session holds; you get a reservation when they are freed.",
         _obj({"items": LEASE_ITEMS, "intent": INTENT}, ("items", "intent")),
         True, "nondeterministic", "mutates-external", "low", _lease_interest),
    Tool("propose", "change", "propose",
         "Propose the workspace's local changes for trunk. The claim's fields you leave out are taken "
         "from the facts; a claim that does not match them is denied with claim_mismatch.",
         _obj({"intent": INTENT, "claim": CLAIM}, ("intent",)),
         True, "nondeterministic", "mutates-external", "medium", _propose),
    Tool("withdraw", "change", "withdraw", "Withdraw a change you proposed.",
         _obj({"change": STR}, ("change",)), True, "nondeterministic", "mutates-external", "low", _withdraw),
    Tool("sync", "workspace", "sync",
         "Bring trunk into the workspace, merging symbol by symbol; conflicts stand in the files with markers.",
         _obj({}), True, "nondeterministic", "writes-filesystem", "medium", _sync),
    Tool("events", "session", "events",
         "What happened that concerns you from sequence number from on; pass next as the next from.",
         _obj({"from": {"type": ["integer", "null"]}}), False, "nondeterministic", "read-only", "low", _events),
    Tool("diff", "change", "diff", "The unified diff of a change, with the symbols each file touches.",
         _obj({"change": STR}, ("change",)), False, "nondeterministic", "read-only", "low", _diff),
    Tool("negotiate", "session", "negotiate",
         "Send another session a message: claim, yield (hands over a lease set), counter, accept or decline.",
         _obj({"thread": STR, "to_session": STR, "message": {"type": "object"}}, ("thread", "to_session", "message")),
         True, "nondeterministic", "mutates-external", "low", _negotiate),
    Tool("end", "session", "end", "End the session; its token stops working. Local changes not proposed are recorded.",
         _obj({}), True, "nondeterministic", "destructive", "low", _end),
]
BY_NAME = {t.name: t for t in TOOLS}
BY_ID = {t.tool_id: t for t in TOOLS}


def invoke(s: AgentSession, tool: Tool, args) -> dict:
    """Run one tool; every failure is a ToolFailure whose message is safe to show."""
    unknown, errors = check(tool.schema, args if args is not None else {})
    if errors or (unknown and tool.changes):
        problems = errors + [f"{tool.name} takes no argument {k}" for k in unknown]
        raise ToolFailure("invalid", "; ".join(problems), expected=tool.schema)
    given = {k: v for k, v in (args or {}).items() if k not in unknown}
    if s.over.is_set():
        raise ToolFailure("session_inactive", SESSION_OVER)
    try:
        out = tool.run(s, given)
    except (LoncaError, Usage, Unreachable) as e:
        if isinstance(e, LoncaError) and e.code == "session_inactive":
            s.over.set()
        raise tool_failure(e) from None
    if unknown:
        out = {**out, "warnings": [f"{tool.name} takes no argument {k}; it was ignored" for k in unknown],
               "expected": tool.schema}
    return out


def tool_failure(e: LoncaError | Usage | Unreachable) -> ToolFailure:
    """What a tool caller is told of an error: the daemon's code, with a generic message where
    the daemon's may carry internals."""
    if isinstance(e, LoncaError):
        if e.code == "session_inactive":
            return ToolFailure("session_inactive", SESSION_OVER)
        return ToolFailure(e.code, GENERIC.get(e.code, e.message))
    if isinstance(e, Usage):
        return ToolFailure("usage", str(e))
    return ToolFailure("unreachable", "the Lonca daemon cannot be reached")


def inbox(s: AgentSession) -> dict:
    """What other sessions want of the agent (told once): {"events", "text"}, empty when the
    daemon cannot say (no session any more, unreachable)."""
    try:
        return s.call("inbox")
    except (LoncaError, Usage, Unreachable):
        return {"events": [], "text": None}


def inbox_text(s: AgentSession) -> str | None:
    """The inbox for a model; None when nothing."""
    return inbox(s)["text"]
