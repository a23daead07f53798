"""`status`'s lists of changes and of sessions over, kept encoded between entries.

`status` is read far more often than the log moves: every open console page reads it again at
each entry, and agents and scripts poll it. What it lists of history, the latest STATUS_WINDOW
sessions over and changes that left the queue (state.py), made each answer after 10,000 ended
sessions cost twice an empty repository's, most of it in encoding those records again. So the
changes and the sessions over are encoded once per entry and spliced into each answer as they
are (wire_json.Raw).

Only an entry changes what they say: the records, the windows and the policy that names a change's
runs all move with the state's `next_seq`, and a replay makes a new RepoState, so the part held is
the one of that RepoState at that seq. The pending entries are the same, made at the first answer
that lists them after an entry: every open review page reads them again at each entry. Live
sessions are encoded at every answer: whether one is active, and when its last hook came (the
daemon's memory, not the log), move without an entry.
A session's last hook is forgotten by the sweep soon after it is over; its encoded part keeps
the time it showed when the part was made."""
from dataclasses import dataclass

from lonca.protocol import actor_label

from .state import ChangeRec, RepoState
from .wire_json import Raw, encode


@dataclass
class _Held:
    rs: RepoState
    seq: int
    changes: Raw
    gone: bytes     # the sessions over, encoded as the items of a JSON array (no brackets)
    pending: Raw | None = None   # made at the first answer that lists it


class StatusParts:
    def __init__(self, hooks: dict):
        self._hooks = hooks     # (repo, session) -> HookSeen, the daemon's memory of hooks
        self._held: dict[str, _Held] = {}

    def changes(self, rs: RepoState, now_ms: int) -> Raw:
        """Every change in the queue or waiting for a human, and the latest STATUS_WINDOW that
        left, by proposal order."""
        return self._of(rs, now_ms).changes

    def pending(self, rs: RepoState, now_ms: int) -> Raw:
        """Every entry waiting for a human, by seq: only an entry changes one (its approvals,
        the policy that names its runs), so it is encoded once an entry, like the changes."""
        held = self._of(rs, now_ms)
        if held.pending is None:
            held.pending = Raw(encode([pending_json(rs, pr) for pr in sorted(rs.pending.values(), key=lambda x: x.seq)]))
        return held.pending

    def sessions(self, rs: RepoState, now_ms: int) -> Raw:
        """Every live session, then the latest STATUS_WINDOW that are over."""
        live = encode([self.session_json(rs, s, now_ms) for s in rs.live_sessions])[1:-1]
        gone = self._of(rs, now_ms).gone
        return Raw(b"[" + b",".join(part for part in (live, gone) if part) + b"]")

    def session_json(self, rs: RepoState, session: str, now_ms: int) -> dict:
        """A session as the log replays it, with when its last hook came (the daemon's memory)."""
        out = rs.sessions[session].to_json(now_ms)
        seen = self._hooks.get((rs.name, session))
        out["last_hook_ms"] = seen.last_hook_ms if seen else None
        return out

    def _of(self, rs: RepoState, now_ms: int) -> _Held:
        held = self._held.get(rs.name)
        if held is None or held.rs is not rs or held.seq != rs.next_seq:
            # a session over is active at no time to come: a later clock encodes it the same
            gone = encode([self.session_json(rs, s, now_ms) for s in rs.gone_sessions])[1:-1]
            changes = Raw(encode([change_json(rs, c) for c in sorted(listed_changes(rs), key=lambda c: c.proposed_seq)]))
            held = self._held[rs.name] = _Held(rs, rs.next_seq, changes, gone)
        return held


def listed_changes(rs: RepoState) -> list[ChangeRec]:
    """Every change in the queue or waiting for a human, and the latest STATUS_WINDOW that left."""
    ids = dict.fromkeys([*rs.queue, *(pr.change for pr in rs.pending.values() if pr.change), *rs.settled.done])
    return [rec for rec in (rs.changes.get(c) or rs.settled.recent.get(c) for c in ids) if rec is not None]


def change_json(rs: RepoState, c: ChangeRec) -> dict:
    return {"change": c.id, "actor": actor_label(c.actor), "status": c.status, "provenance": c.provenance,
            "commit": c.commit, "base": c.base, "intent": c.intent, "created_ms": c.created_ms,
            "version": c.version, "paths": c.paths, "checks": c.checks, "runs": rs.policy.runs(c),
            "priority_seq": c.priority_seq}


def pending_json(rs: RepoState, pr) -> dict:
    rec = rs.changes.get(pr.change) if pr.change else None
    sess = rs.sessions.get(rec.session) if rec and rec.session else None
    return {"seq": pr.seq, "created_ms": pr.created_ms, "actor": actor_label(pr.actor), "op": pr.op,
            "reasons": pr.reasons, "approvals": pr.approvals, "required": rs.policy.approvals_required,
            "change": pr.change, "base": rec.base if rec else None, "intent": rec.intent if rec else None,
            "agent": sess.agent if sess else None, "task": sess.task if sess else None,
            "paths": rec.paths if rec else [], "checks": rec.checks if rec else [],
            "runs": rs.policy.runs(rec) if rec else None}
