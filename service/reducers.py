"""How each entry changes the state: `apply` and the one table of reducers, by op kind.

Replaying a log needs this module and `state.py` only: no method module has to be imported for
its side effect, so a replay cannot silently skip an operation whose module was not loaded.
A reducer is `(state, repo_state, entry, op, outcome)`; it runs for entries being appended and
entries replayed alike, and changes nothing outside the state (no I/O, no clock: time is the
entry's `time_ms`)."""
import heapq
from typing import Callable

from lonca.audit import recovered_human

from .lease_model import Interest, LeaseSet, Reservation, any_conflict
from .scope import full_scope
from .settled import SettledChanges
from .state import ChangeRec, PendingRec, RepoState, SessionRec, State
from .trunk_history import TrunkHistory

Reducer = Callable[[State, RepoState, dict, dict, str], None]


def apply(st: State, repo: str, entry: dict, hash_hex: str) -> None:
    """The one place an entry changes the state (State.apply calls it)."""
    op = entry["op"]
    kind = op["op"]
    allowed = entry["decision"]["outcome"]
    if kind == "repo.init" and allowed == "allow":
        rs = st.repos[repo] = RepoState(name=repo, daemon_key=op["daemon_key"], trunk=op["trunk"],
                                        policy_id=op["policy"], profile=op.get("profile", "cooperative"),
                                        humans={op["human"]: op["human_key"]},
                                        settled=SettledChanges(repo, st.settled_reader),
                                        trunks=TrunkHistory(repo, st.trunk_reader))
        rs.trunks.add(op["trunk"], 0)
        rs.policy = st.policy_of(repo, op["policy"])
    rs = st.repos[repo]
    rs.next_seq = entry["seq"] + 1
    rs.head_hash = hash_hex
    sig = entry.get("human")
    if sig:  # a recovery is signed with the recovery key: its sign count is that key's
        keys = rs.recovery if recovered_human(op) is not None else rs.humans
        st.note_signature(sig, keys.get(sig["human"]))
    _expire(rs, entry["time_ms"])
    REDUCERS[kind](st, rs, entry, op, allowed)
    _reserve(rs, entry["time_ms"])


# -- expiry and reservations: what time does, at each entry ------------------------------------

def _expire(rs: RepoState, t: int) -> None:
    """Drop what ran out by this entry's time: sets past their TTL, sessions past their TTL or
    their heartbeat timeout (their sets go, lent sets go back), reservations past their window."""
    while rs._expiries and rs._expiries[0][0] <= t:
        _, what, ident = heapq.heappop(rs._expiries)
        if what == "set":
            s = rs.sets.get(ident)
            if s and s.items and s.expires_ms <= t:
                _end_set(rs, s, t)
        elif what == "beat":
            rs.beat_due.pop(ident, None)
            rec = rs.sessions.get(ident)
            if rec and not rec.ended and rec.last_seen_ms is not None:
                due = rec.last_seen_ms + rs.policy.heartbeat_timeout_ms
                if due <= t:
                    _end_session_sets(rs, ident, t)
                else:  # it beat since: one check when the latest beat times out
                    _check_beat(rs, ident, due)
        elif what == "session":
            rec = rs.sessions.get(ident)
            if rec and rec.expires_ms <= t:
                _end_session_sets(rs, ident, t)
                rs.session_over(ident)
    rs.reservations = [r for r in rs.reservations if r.until_ms > t]


def _end_set(rs: RepoState, s: LeaseSet, t: int) -> None:
    if s.session != s.owner and s.owner in rs.sessions and rs.sessions[s.owner].active(t):
        rs.move_set(s, s.owner)  # a lent set goes back with the time it had
        if s.expires_ms > t:
            return
    rs.drop_set(s)


def _end_session_sets(rs: RepoState, session: str, t: int) -> None:
    for sid in list(rs.sets_by_session.get(session, ())):
        s = rs.sets.get(sid)
        if s and s.items:
            _end_set(rs, s, t)


def _reserve(rs: RepoState, t: int) -> None:
    """The oldest interest whose items nobody else holds any more gets a reservation."""
    if not rs.interests:
        return
    keep = []
    for it in rs.interests:
        reserved = any(r.session != it.session and any_conflict(r.items, it.items)
                       for r in rs.reservations)
        if not reserved and not rs.holders(it.items, it.session, t):
            r = Reservation(session=it.session, items=it.items, until_ms=t + rs.policy.reservation_ms, intent=it.intent)
            rs.reservations.append(r)   # its event is told from rs.reservations (session_events)
        else:
            keep.append(it)
    rs.interests = keep


# -- sessions, humans, policy --------------------------------------------------------------------------------

def _session_start(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome != "allow":
        return
    rec = SessionRec(id=op["session"], agent=op["agent"], model=op.get("model"), task=op.get("task"),
                     scope=full_scope(op["scope"]), created_ms=entry["time_ms"], expires_ms=op["expires_ms"],
                     harness=op.get("harness"))
    old = rs.sessions.get(op.get("continues") or "")
    rs.add_session(rec)
    if old is not None:
        _take_over(rs, old, rec, entry["time_ms"])


def _take_over(rs: RepoState, old: SessionRec, new: SessionRec, t: int) -> None:
    """`new` continues `old`'s workspace (seed 001, session start --continue): taint, level and
    what was seen written carry over, so the files the old session left are judged as they were
    seen, and so does its line's verification time ([quota]); the old session ends; its leases end but for items pinned to a change in flight, which
    pass to the new session with their sets."""
    old.continued_by, new.continued_from = new.id, old.id
    new.level, new.taint, new.unhooked, new.bound_ms = old.level, old.taint, old.unhooked, old.bound_ms
    new.written = dict(old.written)
    new.verification_ms = old.verification_ms   # its line's so far; what follows adds to both
    if not old.ended:
        old.ended = True
        _end_session_sets(rs, old.id, t)
        rs.interests = [i for i in rs.interests if i.session != old.id]
        rs.session_over(old.id)
    for sid in list(rs.sets_by_session.get(old.id, ())):
        s = rs.sets.get(sid)
        if s is not None and s.pinned:
            rs.move_set(s, new.id)
            s.owner = new.id


def _observe(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    rec = rs.sessions.get(op["session"])
    if rec is None or outcome != "allow":
        return
    for e in op.get("events", []):
        kind = e.get("kind")
        if kind == "heartbeat":
            rec.last_seen_ms = entry["time_ms"]
            if rec.id not in rs.beat_due:
                _check_beat(rs, rec.id, rec.last_seen_ms + rs.policy.heartbeat_timeout_ms)
        elif kind == "write" and e["decision"] == "allow":   # hook.event let a write tool run
            rec.written.update(dict.fromkeys(e["paths"]))
        elif kind == "unhooked" and rec.unhooked is None:    # mcp.call met no before-tool event
            rec.unhooked = {"tool": e["tool"], "seen_ms": entry["time_ms"]}
            rec.taint = rec.taint or "unhooked_session"
            rec.level = "unobserved"
        elif kind == "unproposed":                           # hook.stop's report
            rec.unproposed = {"paths": e["paths"], "total": e["total"], "rounds": e["round"],
                              "seen_ms": entry["time_ms"]}


def _taint(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    rec = rs.sessions.get(op["session"])
    if rec and outcome == "allow":
        rec.taint = rec.taint or op["reason"]


def _session_bind(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    rec = rs.sessions.get(op["session"])
    if rec and outcome == "allow":
        rec.level = op["level"]
        rec.bound_ms = rec.bound_ms or entry["time_ms"]


def _check_beat(rs: RepoState, session: str, due: int) -> None:
    """One pending heartbeat check per session, moved on when it comes due (_expire), instead of
    one per heartbeat: the heap stays the size of the sessions, not of their heartbeats."""
    rs.beat_due[session] = due
    heapq.heappush(rs._expiries, (due, "beat", session))


def _session_end(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    rec = rs.sessions.get(op["session"])
    if rec and outcome == "allow":
        rec.ended = True
        if "unproposed" in op:
            rec.unproposed = {**op["unproposed"], "rounds": 1, "seen_ms": entry["time_ms"]}
        _end_session_sets(rs, rec.id, entry["time_ms"])
        rs.interests = [i for i in rs.interests if i.session != rec.id]
        rs.session_over(rec.id)


def _human_enroll(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.humans[op["human"]] = op["key"]
        rs.recovery.pop(op["human"], None)  # a name enrolled again starts without a recovery key
        if entry["actor"].get("kind") == "human" and entry["actor"]["name"] != op["human"]:
            rs.enrolled_by[op["human"]] = entry["actor"]["name"]


def _human_key(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """human.rotate and human.recover: the name signs with the new key from this entry on; a
    recovery key recovers once (the human sets a new one with the new key)."""
    if outcome == "allow":
        rs.humans[op["human"]] = op["key"]
        if op["op"] == "human.recover":
            rs.recovery.pop(op["human"], None)


def _recovery_key(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.recovery[op["human"]] = op["key"]


def _human_revoke(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.humans.pop(op["human"], None)
        rs.recovery.pop(op["human"], None)


def _cap_revoke(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """A revoked capability ends with every capability made from it."""
    if outcome == "allow" and op["session"] in rs.sessions:
        for sid in rs.session_line(op["session"]):
            if not rs.sessions[sid].ended:
                _session_end(st, rs, entry, {"op": "session.end", "session": sid, "reason": op["reason"]}, outcome)


def _daemon_rotate(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """The entries after this one are signed with the new key (this one with the old)."""
    if outcome == "allow":
        rs.daemon_key = op["key"]


def _daemon_recover(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """A foreign log adopted: this entry and the next are signed with the adopting daemon's key;
    with `recover`, the human's name also moves to a new key and the recovery key is spent."""
    if outcome == "allow":
        rs.daemon_key = op["key"]
        if "recover" in op:
            rs.humans[op["recover"]["human"]] = op["recover"]["key"]
            rs.recovery.pop(op["recover"]["human"], None)


def _policy_update(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.policy_id = op["policy"]
        rs.policy = st.policy_of(rs.name, op["policy"])


def _freeze(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.frozen = op.get("reason") or "frozen" if op["op"] == "freeze" else None


def _redact(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        rs.redacted.add(op["blob"])


# -- leases ------------------------------------------------------------------------------------

def _apply_acquire(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    t, me = entry["time_ms"], entry["actor"]["session"]
    if outcome != "allow":
        # someone waits: renewing past max_hold is refused from now on; not a session policy.cedar
        # forbids the items, which would wait for ever (its reasons are new: older logs replay the same)
        if not any(r.startswith("policy_") for r in entry["decision"]["reasons"]):
            for s, _held, _want, _pinned in rs.holders(op["items"], me, t):
                s.wanted_ms = t
                rs.index.touch(s)
        return
    existing = rs.sets.get(op["set"])
    if existing:
        rs.index.remove(existing)
        existing.items = existing.items + [i for i in op["items"] if i not in existing.items]
        existing.expires_ms = t + op["ttl_ms"]
        rs.index.add(existing)
        rs.schedule_expiry(existing)
    else:
        rs.add_set(LeaseSet(id=op["set"], session=me, owner=me, items=op["items"], intent=op["intent"],
                            acquired_ms=t, expires_ms=t + op["ttl_ms"]))
    _got(rs, me, op["items"])


def _got(rs: RepoState, session: str, items: list[dict]) -> None:
    """`session` now holds `items`: its interests and reservations in them are settled, so no
    reservation tells it to acquire what it has (a yielded set arrives this way too)."""
    rs.reservations = [r for r in rs.reservations if not (r.session == session and any_conflict(r.items, items))]
    rs.interests = [i for i in rs.interests if not (i.session == session and any_conflict(i.items, items))]


def _apply_release(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    s = rs.sets.get(op["set"])
    if outcome == "allow" and s:
        if s.session != s.owner and s.owner in rs.sessions and rs.sessions[s.owner].active(entry["time_ms"]):
            rs.move_set(s, s.owner)
        else:
            rs.drop_set(s)


def _apply_renew(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    s = rs.sets.get(op["set"])
    if outcome == "allow" and s:
        s.expires_ms = entry["time_ms"] + op["ttl_ms"]
        rs.schedule_expiry(s)


def _apply_interest(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow":
        t = entry["time_ms"]
        rs.interests.append(Interest(session=entry["actor"]["session"], items=op["items"], intent=op["intent"],
                                     created_ms=t, blocks_until_ms=t + rs.policy.interest_block_ms, seq=entry["seq"]))


# -- proposals and the queue -------------------------------------------------------------------

def touched_paths(facts: dict) -> list[str]:
    """The files a change adds, modifies or deletes."""
    return sorted(set(facts.get("added_files", [])) | set(facts.get("modified_files", [])) | set(facts.get("deleted_files", [])))


def _apply_propose(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    actor, facts = entry["actor"], entry.get("facts") or {}
    session = actor.get("session")
    if op.get("commit") is None:
        return
    paths = touched_paths(facts)
    # a new version of a change in flight or settled: as it was before this entry (a replay's
    # table may hold what later entries settled)
    old = rs.change(op["change"], entry["seq"])
    if old and old.id in rs.changes:  # a new version takes the old one's place in the queue or review
        leave_queue(rs, old.id, old.status)
    status = {"allow": {"status": "queued"}, "escalate": {"status": "pending", "seq": entry["seq"]},
              "deny": {"status": "rejected", "reasons": entry["decision"]["reasons"]}}[outcome]
    rec = ChangeRec(id=op["change"], actor=actor, session=session, commit=op["commit"], base=op["base"],
                    claim=op["claim"], facts=facts, status=status,
                    provenance=_provenance(rs, actor, entry["decision"]["reasons"]),
                    proposed_seq=entry["seq"], created_ms=old.created_ms if old else entry["time_ms"],
                    version=old.version + 1 if old else 1, paths=paths, intent=op["claim"].get("intent") or "",
                    checks=old.checks if old else [], versions=(old.versions if old else []) + [entry["seq"]])
    rs.changes[rec.id] = rec
    if outcome == "deny":
        rs.settle(rec, entry["seq"])
        return
    if session in rs.sessions:   # hook.stop counts its rounds from the last proposal
        rs.sessions[session].unproposed = None
    for reason in entry["decision"]["reasons"]:
        if reason.startswith("replaces:"):
            gone = rs.changes.get(reason.split(":", 1)[1])
            # logs written before the fix name the new version itself: it is never withdrawn
            if gone and gone.id != rec.id and gone.status["status"] == "pending":
                leave_queue(rs, gone.id, {"status": "withdrawn"})
        elif reason.startswith("affected_lease:"):
            _, sess, set_id = reason.split(":", 2)
            # a human's change needs no lease: what it changes under a lease is news to the holder
            symbols = changed_symbols(facts) + facts.get("adds", []) if actor["kind"] == "human" else \
                facts.get("signature_changes", []) + [o for o, _ in facts.get("renames", [])] + facts.get("deletes", [])
            rs.event({"kind": "symbols_changed", "seq": entry["seq"], "change": rec.id, "from": session,
                      "sets": [set_id], "symbols": symbols}, sess)
    for pin in op.get("pins", []):
        s = rs.sets.get(pin["set"])
        if s:
            rs.index.remove(s)
            s.pinned[rec.id] = pin["items"]
            rs.index.add(s)
            rs.pins.setdefault(rec.id, set()).add(s.id)
    if outcome == "allow":
        rs.queue.append(rec.id)
    else:
        rs.pending[entry["seq"]] = PendingRec(seq=entry["seq"], created_ms=entry["time_ms"], actor=actor,
                                              op="change.propose", reasons=entry["decision"]["reasons"], change=rec.id)


def _provenance(rs: RepoState, actor: dict, reasons: list[str]) -> str:
    """human; tainted (its session is); clean (every write seen by the session's hooks); else
    unobserved."""
    if actor["kind"] == "human":
        return "human"
    rec = rs.sessions.get(actor.get("session") or "")
    if rec is not None and rec.taint:
        return "tainted"
    if rec is None or rec.level == "unobserved" or any(r.startswith("unobserved_write:") for r in reasons):
        return "unobserved"
    return "clean"


def _leave_pending(rs: RepoState, change: str) -> None:
    for seq, pr in list(rs.pending.items()):
        if pr.change == change:
            del rs.pending[seq]


def leave_queue(rs: RepoState, change: str, status: dict) -> None:
    """A change leaves the queue (integrated, conflicted, rejected, withdrawn): unpin its items,
    and it settles at the entry being applied."""
    rec = rs.changes[change]
    rec.status = status
    if change in rs.queue:
        rs.queue.remove(change)
    _leave_pending(rs, change)
    rs.unpin(change)
    rs.settle(rec, rs.next_seq - 1)


def _apply_priority(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow" and op["change"] in rs.changes:
        rs.changes[op["change"]].priority_seq = entry["seq"]


def _apply_withdraw(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome == "allow" and op["change"] in rs.changes:
        leave_queue(rs, op["change"], {"status": "withdrawn"})


def _apply_approve(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    pending = rs.pending.get(op["target_seq"])
    if outcome != "allow" or pending is None:
        return
    pending.approvals.append(entry["actor"]["name"])
    rec = rs.changes.get(pending.change) if pending.change else None
    if rec and op.get("checks"):
        rec.checks = sorted(set(rec.checks) | set(op["checks"]))
    if len({rs.principal(a) for a in pending.approvals}) < rs.policy.approvals_required:
        return
    del rs.pending[op["target_seq"]]
    if rec:
        rec.status = {"status": "queued"}
        rec.provenance = "reviewed"
        rs.queue.append(rec.id)
        rs.event({"kind": "approved", "seq": entry["seq"], "target_seq": op["target_seq"], "change": rec.id}, rec.session or "")


def _apply_reject(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    # a denied rejection leaves the pending entry waiting (policy.cedar can deny one; before it, the
    # only denial was not_pending, with nothing to take out, so older logs replay the same)
    if outcome != "allow":
        return
    pending = rs.pending.pop(op["target_seq"], None)
    if pending is None:
        return
    if pending.change and pending.change in rs.changes:
        rec = rs.changes[pending.change]
        leave_queue(rs, rec.id, {"status": "rejected", "reasons": [f"rejected: {op['reason']}"]})
        rs.event({"kind": "rejected", "seq": entry["seq"], "target_seq": op["target_seq"], "reason": op["reason"],
                  "change": rec.id}, rec.session or "")


def _apply_comment(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    pending = rs.pending.get(op["target_seq"])
    rec = rs.changes.get(pending.change) if pending and pending.change else None
    if outcome != "allow" or rec is None:
        return
    rs.event({"kind": "comment", "seq": entry["seq"], "target_seq": op["target_seq"], "change": rec.id,
              "human": entry["actor"]["name"], "path": op["path"], "line": op["line"],
              "symbol": op["symbol"], "body": op["text"], "request_changes": op["request_changes"]}, rec.session or "")


def _apply_check(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """The checks of a pending change's version, run while it waits for a human."""
    rec = rs.changes.get(op["change"])
    if rec is not None:
        rec.review_commit, rec.review_seq, rec.review_evidence = op["commit"], entry["seq"], entry["evidence"]


def _duration(evidence: list[dict]) -> int:
    return sum(int(a["details"].get("duration_ms") or 0) for a in evidence)


def _apply_integrate(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    rec = rs.changes.get(op["change"])
    if rec is None:
        return
    rec.integrate_seq, rec.integrate_decision, rec.evidence = entry["seq"], entry["decision"], entry["evidence"]
    _account(rs, entry, [rec])
    if outcome == "allow":
        _integrated(rs, entry, rec, op["merged"])
        return
    reasons = entry["decision"]["reasons"]
    if op["conflicts"] or "merge_conflict" in reasons:
        leave_queue(rs, rec.id, {"status": "conflicted", "symbols": op["conflicts"]})
        rs.event({"kind": "conflicted", "seq": entry["seq"], "change": rec.id, "conflicts": op["conflicts"]}, rec.session or "")
    else:
        leave_queue(rs, rec.id, {"status": "rejected", "reasons": reasons})
        rs.event({"kind": "failed", "seq": entry["seq"], "change": rec.id, "reasons": reasons}, rec.session or "")


def _apply_batch(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    recs = [rs.changes[c] for c, _ in op["merged"] if c in rs.changes]
    _account(rs, entry, recs[:1])
    for rec, (_, commit) in zip(recs, op["merged"]):
        rec.integrate_seq, rec.integrate_decision, rec.evidence = entry["seq"], entry["decision"], entry["evidence"]
        _integrated(rs, entry, rec, commit)


def _integrated(rs: RepoState, entry: dict, rec, commit: str) -> None:
    rs.trunk = commit
    rs.integrations += 1
    rs.trunks.add(commit, rs.integrations)
    leave_queue(rs, rec.id, {"status": "integrated", "commit": commit})
    rs.event({"kind": "integrated", "seq": entry["seq"], "change": rec.id}, rec.session or "")


def _account(rs: RepoState, entry: dict, recs: list) -> None:
    """Verification time counts against the day (UTC) and the sessions' lines ([quota]); a
    check that passed on a retry counts as flaky (status.flaky)."""
    for a in entry["evidence"]:
        if a["details"].get("flaky") == "true":
            name = a["details"].get("name", a["check"])
            rs.flaky[name] = rs.flaky.get(name, 0) + 1
    ms = _duration(entry["evidence"])
    if not ms:
        return
    day = entry["time_ms"] // 86_400_000
    rs.verification_days[day] = rs.verification_days.get(day, 0) + ms
    for rec in recs:   # on the workspace's session now, and up its line
        sess = rs.sessions.get(rs.current(rec.session or ""))
        while sess is not None:
            sess.verification_ms += ms
            sess = rs.line_up(sess)


# -- what sessions tell each other -------------------------------------------------------------

def _apply_negotiate(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome != "allow":
        return
    me, to, msg = entry["actor"]["session"], op["to_session"], op["message"]
    rs.event({"kind": "message", "seq": entry["seq"], "thread": op["thread"], "from": me, "message": msg}, to)
    if msg["type"] == "yield":
        s = rs.sets.get(msg["set"])
        if s is None:
            return
        if msg.get("to"):
            rs.move_set(s, to)
            s.owner = to
            _got(rs, to, s.items)
            rs.event({"kind": "lease_received", "seq": entry["seq"], "set": s.id, "from": me}, to)
        else:
            rs.drop_set(s)


def _apply_attenuate(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    if outcome != "allow":
        return
    parent = rs.sessions[op["parent"]]
    rs.add_session(SessionRec(id=op["child"], agent=op["agent"], model=parent.model, task=parent.task,
                              scope=op["scope"], created_ms=entry["time_ms"], expires_ms=op["expires_ms"],
                              parent=parent.id))
    for sid in op.get("leases", []):
        s = rs.sets.get(sid)
        if s:
            rs.move_set(s, op["child"])
            rs.event({"kind": "lease_received", "seq": entry["seq"], "set": sid, "from": parent.id}, op["child"])


def changed_symbols(facts: dict) -> list[str]:
    """What an import changed of the symbols trunk had: its symbols_changed events' `symbols`."""
    return sorted(set(facts.get("edits", []) + facts.get("deletes", []) + facts.get("signature_changes", [])
                      + [old for old, _ in facts.get("renames", [])]))


def _apply_import(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """Trunk is the imported commit, one more integration; each lease the decision names as
    affected hears of it (symbols_changed, with no change and no session: a human's import)."""
    if outcome != "allow":
        return
    rs.trunk = op["commit"]
    rs.integrations += 1
    rs.trunks.add(op["commit"], rs.integrations)
    symbols = changed_symbols(entry.get("facts") or {})
    for reason in entry["decision"]["reasons"]:
        if reason.startswith("affected_lease:"):
            _, sess, set_id = reason.split(":", 2)
            rs.event({"kind": "symbols_changed", "seq": entry["seq"], "change": None, "from": None, "sets": [set_id],
                      "symbols": symbols}, sess)


def _nothing(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    """The entry moves the chain (seq, head) and the clock (expiry) only."""


REDUCERS: dict[str, Reducer] = {
    "repo.init": _nothing,  # the repository's state is made in `apply`, before any reducer runs
    "session.start": _session_start,
    "observe": _observe,
    "session.bind": _session_bind,
    "taint": _taint,
    "session.end": _session_end,
    "human.enroll": _human_enroll,
    "human.rotate": _human_key,
    "human.recover": _human_key,
    "human.recovery_key": _recovery_key,
    "human.revoke": _human_revoke,
    "cap.revoke": _cap_revoke,
    "policy.update": _policy_update,
    "daemon.rotate": _daemon_rotate,
    "daemon.recover": _daemon_recover,
    "freeze": _freeze,
    "unfreeze": _freeze,
    "redact": _redact,
    "lease.acquire": _apply_acquire,
    "lease.release": _apply_release,
    "lease.renew": _apply_renew,
    "lease.interest": _apply_interest,
    "change.propose": _apply_propose,
    "change.withdraw": _apply_withdraw,
    "approve": _apply_approve,
    "reject": _apply_reject,
    "comment": _apply_comment,
    "change.check": _apply_check,
    "priority": _apply_priority,
    "change.integrate": _apply_integrate,
    "change.integrate_batch": _apply_batch,
    "negotiate": _apply_negotiate,
    "cap.attenuate": _apply_attenuate,
    "import.external": _apply_import,
    "import.unmediated": _nothing,  # trunk stays the log's: the entry records what was found instead
    "bridge.push": _nothing,        # the push ran outside the log, after the entry
}
