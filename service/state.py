"""The worker's state: nothing but the replay of the logs. `State.apply` is the one place an entry
changes it, for entries being appended and for entries replayed at start alike (reducers.py holds
how each kind does); it reads the policy in force through `policy_of(repo, policy_id)` so replay
decides exactly as the live run did."""
import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from lonca.protocol import SIGNATURE_LIFETIME_MS, SIGNATURE_SKEW_MS, ZERO_HASH

from . import presence
from .lease_model import Interest, LeaseIndex, LeaseSet, Reservation, items_conflict, split
from .policy import DEFAULT, Policy
from .settled import STATUS_WINDOW, Reader, SettledChanges
from .trunk_history import Reader as TrunkReader, TrunkHistory

EVENTS_KEPT = 1000  # the events a session can still read (`events`, `inbox`): its latest this many
# past EVENTS_KEPT, appended before the oldest are cut: each cut moves EVENTS_KEPT pointers, so
# appending costs EVENTS_KEPT / EVENTS_SLACK = 8 pointer moves on average, and a session holds at
# most EVENTS_KEPT + EVENTS_SLACK events (trimmed in halves it held up to twice EVENTS_KEPT: 32
# live sessions kept ~17 MB, half of it read by nobody)
EVENTS_SLACK = EVENTS_KEPT // 8
EXPIRIES_MIN = 256  # the expiry heap is pruned past twice this many items, or twice what it kept last time
SETTLED_FACTS = ("signature_changes",)  # what a change out of the queue keeps of its facts (Policy.runs)

@dataclass
class SessionRec:
    id: str
    agent: str
    model: str | None
    task: str | None
    scope: dict
    created_ms: int
    expires_ms: int
    parent: str | None = None
    harness: str | None = None
    level: str = "unobserved"
    taint: str | None = None
    ended: bool = False
    last_seen_ms: int | None = None
    verification_ms: int = 0
    unproposed: dict | None = None
    bound_ms: int | None = None         # when its hook sent hook.bind
    unhooked: dict | None = None        # the first lonca mcp tool whose before-tool event never came
    continued_from: str | None = None   # the session of the workspace this one took over
    continued_by: str | None = None     # the session that took this one's workspace over
    written: dict[str, None] = field(default_factory=dict)  # paths its hooks let a write tool write (a JSON-able set)

    def active(self, now_ms: int) -> bool:
        return not self.ended and now_ms < self.expires_ms

    def to_json(self, now_ms: int) -> dict:
        return {
            "id": self.id, "agent": self.agent, "model": self.model, "task": self.task,
            "parent": self.parent, "scope": self.scope, "created_ms": self.created_ms,
            "expires_ms": self.expires_ms, "level": self.level, "taint": self.taint,
            "active": self.active(now_ms), "ended": self.ended, "last_seen_ms": self.last_seen_ms,
            "verification_ms": self.verification_ms, "harness": self.harness,
            "continued_from": self.continued_from, "continued_by": self.continued_by, "unproposed": self.unproposed,
            "bound_ms": self.bound_ms, "last_hook_ms": None, "unhooked": self.unhooked,
        }


@dataclass(slots=True)  # one record per change ever: a __dict__ each was 0.6 KB of the 2.4 KB
class ChangeRec:
    id: str
    actor: dict
    session: str | None
    commit: str
    base: str
    claim: dict | None      # None once the change left the queue (settle): its proposal entry holds it
    facts: dict
    status: dict
    provenance: str
    proposed_seq: int
    created_ms: int
    version: int
    paths: list[str]
    intent: str
    checks: list[str] = field(default_factory=list)
    integrate_seq: int | None = None
    integrate_decision: dict | None = None
    evidence: list = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # proposed_seq of every version
    review_commit: str | None = None    # the commit the last change.check ran on (checks before the decision)
    review_seq: int | None = None
    review_evidence: list = field(default_factory=list)
    priority_seq: int | None = None  # a human's signed priority: ahead of what it is independent of

    def settle(self) -> None:
        """The change left the queue for good (integrated, failed, denied, withdrawn, replaced): its
        claim and facts stay in its proposal entry in the log, where change.get and change.diff
        read them; kept is what status reads (the facts `Policy.runs` looks at). The record then
        leaves memory for the settled_changes table (service/settled.py) once its entry is
        committed: a record of each change ever was what the worker's memory grew by."""
        self.claim = None
        self.facts = {k: self.facts[k] for k in SETTLED_FACTS if self.facts.get(k)}


@dataclass
class PendingRec:
    seq: int
    created_ms: int
    actor: dict
    op: str
    reasons: list[str]
    change: str | None
    approvals: list[str] = field(default_factory=list)


@dataclass
class RepoState:
    name: str
    daemon_key: str
    trunk: str
    policy_id: str
    profile: str
    policy: Policy = DEFAULT
    humans: dict[str, dict] = field(default_factory=dict)  # name -> human key
    recovery: dict[str, dict] = field(default_factory=dict)  # name -> its recovery key (human.recovery_key)
    enrolled_by: dict[str, str] = field(default_factory=dict)  # name -> the human whose human.enroll added it
    sessions: dict[str, SessionRec] = field(default_factory=dict)
    frozen: str | None = None
    redacted: set[str] = field(default_factory=set)  # blob ids a human redacted: every read serves them as null
    next_seq: int = 1
    head_hash: str = ZERO_HASH
    trunks: TrunkHistory = field(default_factory=lambda: TrunkHistory("", None))  # every commit that was trunk
    integrations: int = 0
    sets: dict[str, LeaseSet] = field(default_factory=dict)
    index: LeaseIndex = field(default_factory=LeaseIndex)
    sets_by_session: dict[str, set[str]] = field(default_factory=dict)
    interests: list[Interest] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    changes: dict[str, ChangeRec] = field(default_factory=dict)  # in flight: queued or waiting for a human
    pending: dict[int, PendingRec] = field(default_factory=dict)
    queue: list[str] = field(default_factory=list)
    verification_days: dict[int, int] = field(default_factory=dict)  # UTC day -> ms of checks run
    flaky: dict[str, int] = field(default_factory=dict)  # check -> passes on a retry ([verification] retries)
    pins: dict[str, set[str]] = field(default_factory=dict)  # change -> lease sets with items pinned to it
    events: dict[str, list[dict]] = field(default_factory=dict)  # session -> its events in seq order (EVENTS_KEPT)
    live_sessions: dict[str, None] = field(default_factory=dict)  # not ended and not run out, in start order
    gone_sessions: deque = field(default_factory=lambda: deque(maxlen=STATUS_WINDOW))  # latest over, oldest first
    settled: SettledChanges = field(default_factory=lambda: SettledChanges("", None))  # out of the queue for good
    _expiries: list[tuple[int, str, str]] = field(default_factory=list)  # (when, "set"|"beat"|"session", id)
    _expiries_pruned: int = EXPIRIES_MIN  # the heap's length after it was last pruned (schedule_expiry)
    beat_due: dict[str, int] = field(default_factory=dict)  # session -> when its heartbeat is checked next

    def change(self, change: str, before_seq: int | None = None) -> ChangeRec | None:
        """A change in flight, else as it settled (SettledChanges.get: perhaps a read of the table)."""
        return self.changes.get(change) or self.settled.get(change, before_seq)

    def settle(self, rec: ChangeRec, seq: int) -> None:
        """The change left the queue for good at the entry `seq`: out of the changes in flight."""
        rec.settle()
        del self.changes[rec.id]
        self.settled.add(rec, seq)

    # -- lease liveness -----------------------------------------------------------------------

    def set_live(self, s: LeaseSet, now_ms: int) -> bool:
        rec = self.sessions.get(s.session)
        if rec is None or not rec.active(now_ms) or now_ms >= s.expires_ms:
            return False
        return rec.last_seen_ms is None or now_ms < rec.last_seen_ms + self.policy.heartbeat_timeout_ms

    def live_items(self, s: LeaseSet, now_ms: int) -> list[tuple[dict, str | None]]:
        """(item, change it is pinned to or None) for what the set holds now."""
        out = [(i, None) for i in s.items] if self.set_live(s, now_ms) else []
        out += [(i, c) for c, items in s.pinned.items() for i in items]
        return out

    def holders(self, items: list[dict], session: str, now_ms: int) -> list[tuple[LeaseSet, dict, dict, str | None]]:
        """(set, held item, requested item, pinned change) for each conflict with another session."""
        out, live = [], {}
        for want in items:
            for sid, held_items in self.index.on_path(split(want["symbol"])[0]).items():
                s = self.sets[sid]
                if s.session == session:
                    continue
                if sid not in live:
                    live[sid] = self.set_live(s, now_ms)
                for held, pinned in held_items:
                    if (pinned is not None or live[sid]) and items_conflict(held, want):
                        out.append((s, held, want, pinned))
        return out

    def add_session(self, rec: SessionRec) -> None:
        self.sessions[rec.id] = rec
        self.live_sessions[rec.id] = None
        heapq.heappush(self._expiries, (rec.expires_ms, "session", rec.id))

    def add_set(self, s: LeaseSet) -> None:
        self.sets[s.id] = s
        self.index.add(s)
        self.sets_by_session.setdefault(s.session, set()).add(s.id)
        self.schedule_expiry(s)

    def schedule_expiry(self, s: LeaseSet) -> None:
        """After a new `expires_ms`: the entry that finds the set run out drops it. A set released
        or renewed leaves its item in the heap until its time comes (a lease's TTL, 10 minutes in
        the soak bench: one item per lease.acquire, 0.2 KB each, what the heap grew by); so
        when the heap has doubled since it was last pruned, the items that can no longer do
        anything go (`expiries`)."""
        self.index.touch(s)
        heapq.heappush(self._expiries, (s.expires_ms, "set", s.id))
        if len(self._expiries) > 2 * self._expiries_pruned:
            self._expiries = self.expiries()
            self._expiries_pruned = max(EXPIRIES_MIN, len(self._expiries))

    def expiries(self) -> list[tuple[int, str, str]]:
        """The expiry heap without the items of sets gone or given another time (a later item
        stands for them), sorted (a heap): what a checkpoint holds, whatever was pruned when.
        Such an item does nothing when it comes due (_expire): the set is not there, or it has
        no items, or its own item runs it out at the same entry or an earlier one."""
        sets = self.sets
        return sorted(x for x in self._expiries
                      if x[1] != "set" or ((s := sets.get(x[2])) is not None and s.expires_ms == x[0]))

    def drop_set(self, s: LeaseSet, keep_pinned: bool = True) -> None:
        """The set ends; what is pinned to a change in flight stays until the change leaves."""
        self.index.remove(s)
        if keep_pinned and s.pinned:
            s.items = []
            self.index.add(s)
            return
        self.sets.pop(s.id, None)
        ids = self.sets_by_session.get(s.session)
        if ids:
            ids.discard(s.id)

    def move_set(self, s: LeaseSet, to_session: str) -> None:
        self.index.touch(s)     # the session it leaves
        ids = self.sets_by_session.get(s.session)
        if ids:
            ids.discard(s.id)
        s.session = to_session
        self.index.touch(s)     # and the one it joins
        self.sets_by_session.setdefault(to_session, set()).add(s.id)

    def unpin(self, change: str) -> None:
        """The change left the queue: its pinned items go, and sets left with nothing go too."""
        for sid in self.pins.pop(change, ()):
            s = self.sets.get(sid)
            if s and change in s.pinned:
                self.index.remove(s)
                del s.pinned[change]
                if s.items or s.pinned:
                    self.index.add(s)
                else:
                    self.drop_set(s, keep_pinned=False)

    def principal(self, name: str) -> str:
        """The human a name counts as among approvers: names enrolled by a human count as that
        human, back to the repository's first human or a name the policy says is a person of its
        own ([review] distinct_humans); docs/decisions.md, "Approvals come from distinct humans"."""
        path = [name]
        while name not in self.policy.distinct_humans and name in self.enrolled_by:
            name = self.enrolled_by[name]
            if name in path:  # names that enrolled each other (one revoked, then enrolled again): one human
                return min(path[path.index(name):])
            path.append(name)
        return name

    def session_line(self, session: str) -> list[str]:
        """A session and every capability made from it, down its children (cap.attenuate)."""
        line, todo = [], [session]
        while todo:
            sid = todo.pop()
            line.append(sid)
            todo += [s.id for s in self.sessions.values() if s.parent == sid]
        return line

    def workspace_sessions(self, session: str) -> set[str]:
        """A session and those it continues (one workspace)."""
        out = set()
        rec = self.sessions.get(session)
        out.add(session)
        while rec is not None and rec.continued_from is not None and rec.continued_from not in out:
            out.add(rec.continued_from)
            rec = self.sessions.get(rec.continued_from)
        return out

    def line_root(self, rec: SessionRec | None) -> SessionRec | None:
        """The first session of a session's line: up through the sessions it was made from
        (`parent`) and those it continues. Its verification_ms is the line's total ([quota])."""
        while rec is not None and (up := self.line_up(rec)) is not None:
            rec = up
        return rec

    def line_up(self, rec: SessionRec) -> SessionRec | None:
        return self.sessions.get(rec.parent or rec.continued_from or "")

    def current(self, session: str) -> str:
        """The session now holding `session`'s workspace: itself, or the one that continued it."""
        rec = self.sessions.get(session)
        while rec is not None and rec.continued_by is not None:
            session = rec.continued_by
            rec = self.sessions.get(session)
        return session

    def quota_reasons(self, session: str | None, now_ms: int) -> list[str]:
        """[quota]: verification_quota:session when the session's line used its seconds,
        verification_quota:day when the UTC day did."""
        out = []
        pol = self.policy
        rec = self.line_root(self.sessions.get(session or ""))  # the line's total sits at its root
        if pol.session_seconds and rec is not None and rec.verification_ms >= pol.session_seconds * 1000:
            out.append("verification_quota:session")
        if pol.day_seconds and self.verification_days.get(now_ms // 86_400_000, 0) >= pol.day_seconds * 1000:
            out.append("verification_quota:day")
        return out

    def session_over(self, session: str) -> None:
        """The session ended or ran out: status keeps it in a window, and nobody reads its events."""
        if self.live_sessions.pop(session, 0) is None:
            self.gone_sessions.append(session)
        self.events.pop(session, None)

    def event(self, e: dict, *sessions: str) -> None:
        """Tell sessions `e`: kept per session, so reading costs what is new, not all history. A
        session's workspace taken over by another is told through the one that holds it now."""
        for s in map(self.current, sessions):
            if s in self.live_sessions:
                kept = self.events.setdefault(s, [])
                kept.append(e)
                if len(kept) > EVENTS_KEPT + EVENTS_SLACK:
                    del kept[:-EVENTS_KEPT]


class State:
    def __init__(self, policy_of: Callable[[str, str], Policy] = lambda repo, pid: DEFAULT,
                 settled_reader: Reader | None = None, trunk_reader: TrunkReader | None = None):
        self.repos: dict[str, RepoState] = {}
        self.settled_reader = settled_reader  # the table of settled changes; None: they stay in memory
        self.trunk_reader = trunk_reader  # the table of trunks; None: they stay in memory
        self.nonces: dict[str, int] = {}  # nonce -> when it can be forgotten (a signature is stale by then)
        self.sign_counts: dict[str, int] = {}  # WebAuthn key public -> last sign count (service/presence.py)
        self.policy_of = policy_of

    def repo(self, name: str) -> RepoState | None:
        return self.repos.get(name)

    def note_signature(self, sig: dict, key: dict | None) -> int:
        """A human signature was used: its nonce is spent for as long as the signature could
        pass as fresh, and its authenticator's sign count is recorded. When the nonce may go."""
        until = sig["issued_ms"] + SIGNATURE_LIFETIME_MS + SIGNATURE_SKEW_MS
        self.nonces[sig["nonce"]] = until
        presence.record(self.sign_counts, key, sig["sig"])
        return until

    def forget_spent_nonces(self, now_ms: int) -> None:
        """Nonces whose signatures are stale by now: a reuse is refused as stale anyway."""
        self.nonces = {n: until for n, until in self.nonces.items() if until > now_ms}

    def human_repos(self, human: str, key: dict) -> list[str]:
        """The repositories where this human is enrolled with this key."""
        return sorted(r.name for r in self.repos.values() if r.humans.get(human) == key)

    def apply(self, repo: str, entry: dict, hash_hex: str) -> None:
        """Apply one entry (service/reducers.py holds how each kind changes the state)."""
        _reducers.apply(self, repo, entry, hash_hex)


# Imported as a module, last: reducers.py builds on the classes above, whichever is imported first.
from . import reducers as _reducers  # noqa: E402
