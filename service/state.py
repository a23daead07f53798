"""The worker's state: nothing but the replay of the logs. `apply` is the one place an entry
changes it, for entries being appended and for entries replayed at start alike."""
from dataclasses import dataclass, field

from lonca.protocol import ZERO_HASH

from . import presence


@dataclass
class SessionRec:
    id: str
    agent: str
    model: str | None
    task: str | None
    scope: dict
    created_ms: int
    expires_ms: int
    started_by: str
    parent: str | None = None
    harness: str | None = None
    level: str = "unobserved"
    taint: str | None = None
    ended: bool = False
    end_reason: str | None = None
    last_seen_ms: int | None = None
    verification_ms: int = 0

    def active(self, now_ms: int) -> bool:
        return not self.ended and now_ms < self.expires_ms

    def to_json(self, now_ms: int) -> dict:
        return {
            "id": self.id, "agent": self.agent, "model": self.model, "task": self.task,
            "parent": self.parent, "scope": self.scope, "created_ms": self.created_ms,
            "expires_ms": self.expires_ms, "level": self.level, "taint": self.taint,
            "active": self.active(now_ms), "ended": self.ended, "last_seen_ms": self.last_seen_ms,
            "verification_ms": self.verification_ms, "harness": self.harness,
            "continued_from": None, "continued_by": None, "unproposed": None,
            "bound_ms": None, "last_hook_ms": None, "unhooked": None,
        }


@dataclass
class RepoState:
    name: str
    daemon_key: str
    trunk: str
    policy: str
    profile: str
    humans: dict[str, dict] = field(default_factory=dict)  # name -> human key {"alg", "public"}
    sessions: dict[str, SessionRec] = field(default_factory=dict)
    frozen: str | None = None
    next_seq: int = 1
    head_hash: str = ZERO_HASH


class State:
    def __init__(self):
        self.repos: dict[str, RepoState] = {}
        self.nonces: dict[str, int] = {}  # nonce -> when it can be forgotten (a signature is stale by then)
        self.sign_counts: dict[str, int] = {}  # WebAuthn key public -> last sign count (service/presence.py)

    def repo(self, name: str) -> RepoState | None:
        return self.repos.get(name)

    def human_repos(self, human: str, key: dict) -> list[str]:
        """The repositories where this human is enrolled with this key."""
        return sorted(r.name for r in self.repos.values() if r.humans.get(human) == key)

    def apply(self, repo: str, entry: dict, hash_hex: str) -> None:
        op = entry["op"]
        kind = op["op"]
        if kind == "repo.init" and entry["decision"]["outcome"] == "allow":
            self.repos[repo] = RepoState(name=repo, daemon_key=op["daemon_key"], trunk=op["trunk"],
                                         policy=op["policy"], profile=op.get("profile", "cooperative"),
                                         humans={op["human"]: op["human_key"]})
        rs = self.repos[repo]
        rs.next_seq = entry["seq"] + 1
        rs.head_hash = hash_hex
        sig = entry.get("human")
        if sig:
            self.nonces[sig["nonce"]] = sig["issued_ms"] + 11 * 60_000
            presence.record(self.sign_counts, rs.humans.get(sig["human"]), sig["sig"])
        if entry["decision"]["outcome"] != "allow":
            return
        handler = _APPLY.get(kind)
        if handler:
            handler(rs, entry, op)


def _session_start(rs: RepoState, entry: dict, op: dict) -> None:
    rs.sessions[op["session"]] = SessionRec(
        id=op["session"], agent=op["agent"], model=op.get("model"), task=op.get("task"),
        scope=op["scope"], created_ms=entry["time_ms"], expires_ms=op["expires_ms"],
        started_by=entry["actor"].get("name", ""), harness=op.get("harness"))


def _observe(rs: RepoState, entry: dict, op: dict) -> None:
    rec = rs.sessions.get(op["session"])
    if rec and any(e.get("kind") == "heartbeat" for e in op.get("events", [])):
        rec.last_seen_ms = entry["time_ms"]


def _session_end(rs: RepoState, entry: dict, op: dict) -> None:
    rec = rs.sessions.get(op["session"])
    if rec:
        rec.ended = True
        rec.end_reason = op.get("reason")


def _human_key(rs: RepoState, entry: dict, op: dict) -> None:
    rs.humans[op["human"]] = op["key"]


def _human_revoke(rs: RepoState, entry: dict, op: dict) -> None:
    rs.humans.pop(op["human"], None)


_APPLY = {
    "session.start": _session_start,
    "observe": _observe,
    "session.end": _session_end,
    "human.enroll": _human_key,
    "human.rotate": _human_key,
    "human.revoke": _human_revoke,
}
