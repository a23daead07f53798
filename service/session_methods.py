"""Agent sessions: session.start (a human's signed operation), session.heartbeat, session.end,
session.rotate."""

from lonca.protocol import LoncaError

from .auth import new_agent_token, token_hash
from . import scope as scopes
from .hook_methods import carried_paths, local_files
from .log import Draft, allow, deny
from .methods import Call, method
from .state import RepoState
from .store import TokenRow


def decide_session_start(call: Call, rs: RepoState, op: dict) -> Draft:
    """The decision on a signed session.start: the op is logged as signed, unchanged. One that
    continues a workspace's session (`continues`) is denied, and logged, when it can not take it
    over (continuation_reasons); allowed, the reducer ends the old session and hands it over."""
    d = call.ctx
    now = d.now_ms()
    sid, expires = op["session"], op["expires_ms"]
    if sid in rs.sessions:
        raise LoncaError("invalid", f"the session {sid} exists; sign a new session id")
    if not now < expires <= now + rs.policy.session_max_ttl_ms:
        raise LoncaError("invalid", "op.expires_ms is in the future and within the policy's session lifetime")
    reasons = continuation_reasons(rs, op)
    if reasons:
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons),
                     result=lambda entry: {"session": sid, "expires_ms": expires, "continues": op["continues"]})
    token = new_agent_token()
    row = TokenRow(token_hash=token_hash(token), kind="agent", repo=rs.name, session=sid, expires_ms=expires)

    def result(entry: dict) -> dict:
        return {"token": token, "session": sid, "expires_ms": expires, "continues": op.get("continues")}

    return Draft(actor=call.auth.actor, op=op, decision=allow(), rows=[row], result=result,
                 after_commit=[lambda: d.tokens.add(row)])


def continuation_reasons(rs: RepoState, op: dict) -> list[str]:
    """Why a session.start can not continue the session it names (seed 001, reason codes): none
    by that id, one already continued, a capability's child (its scope is its parent's to give), or
    a scope wider than the old one without `widen`."""
    old_id = op.get("continues")
    if old_id is None:
        return []
    old = rs.sessions.get(old_id)
    if old is None:
        return ["unknown_session"]
    if old.continued_by is not None:
        return ["session_continued"]
    if old.parent is not None:
        return ["continue_child_session"]
    if op.get("widen"):
        return []
    return [f"scope_widening:{w}" for w in scopes.narrower(scopes.full_scope(op["scope"]), old.scope)]


def decide_cap_revoke(call: Call, rs: RepoState, op: dict) -> Draft:
    """A human ends an agent's capability, and every capability made from it: its token stops
    working at this entry (a leaked token is cut off)."""
    rec = rs.sessions.get(op["session"])
    if rec is None:
        raise LoncaError("invalid", f"no session {op['session']} in {rs.name}")
    if not rec.active(call.ctx.now_ms()):
        raise LoncaError("invalid", f"the session {op['session']} has ended or expired already")
    if not op["reason"].strip():
        raise LoncaError("invalid", "op.reason says why the capability is revoked")
    ended = [sid for sid in rs.session_line(rec.id) if rs.sessions[sid].active(call.ctx.now_ms())]
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"sessions_ended": ended})


def live_session(rs: RepoState, sid: str, now_ms: int) -> None:
    """Decided in the writer: a session that ended or expired meanwhile gets session_inactive."""
    rec = rs.sessions.get(sid)
    if rec is None or not rec.active(now_ms):
        raise LoncaError("session_inactive", "the session has ended or expired; stop beating and start a new session")


@method("session.heartbeat", "agent", writes=True)
async def heartbeat(call: Call) -> dict:
    d = call.ctx
    rs = call.repo_state()
    sid = call.auth.session

    def decide() -> Draft:
        live_session(rs, sid, d.now_ms())
        op = {"op": "observe", "session": sid, "events": [{"kind": "heartbeat"}]}
        # A beat after the first is answered before its commit: lost in a crash, its session's
        # leases are free timeout_ms after the beat before it, never later than the log says. The
        # first waits: it is what binds the leases to the beats (docs/decisions.md, "A heartbeat
        # answered before its commit").
        early = sid if rs.sessions[sid].last_seen_ms is not None else None

        def result(entry: dict) -> dict:
            own = [rs.sets[s] for s in sorted(rs.sets_by_session.get(sid, ())) if rs.sets[s].items]
            return {"now_ms": entry["time_ms"], "timeout_ms": rs.policy.heartbeat_timeout_ms,
                    "max_ttl_ms": rs.policy.max_ttl_ms, "leases": [{"set": s.id, "expires_ms": s.expires_ms} for s in own]}
        return Draft(actor=call.auth.actor, op=op, decision=allow(), result=result, answer_early=early)

    # quick: a fleet's beats are not held behind a batch of proposals (docs/decisions.md, "A
    # heartbeat waits for no batch of proposals")
    return await d.log.append(rs.name, decide, quick=True)


@method("session.end", "agent", writes=True)
async def end(call: Call) -> dict:
    p = call.params
    local = local_files(p["files"]) if p.get("files") is not None else None
    d = call.ctx
    rs = call.repo_state()
    sid = call.auth.session
    # what no standing proposal carries, as hook.stop reports it
    carried = await carried_paths(call, rs, local, rs.workspace_sessions(sid)) if local else set()

    def decide() -> Draft:
        live_session(rs, sid, d.now_ms())
        op = {"op": "session.end", "session": sid, "reason": "ended"}
        if local is not None:
            paths = sorted(f["path"] for f in local if f["path"] not in carried)
            op["unproposed"] = {"paths": paths[:32], "total": len(paths)}

        def ended() -> None:
            row = d.tokens.rows.get(call.auth.token_hash)
            if row:
                row.ended = True

        def result(entry: dict) -> dict:
            out = {"session": sid}
            if local is not None:
                out.update(unproposed=op["unproposed"]["paths"], unproposed_total=op["unproposed"]["total"])
            return out
        return Draft(actor=call.auth.actor, op=op, decision=allow(), result=result, after_commit=[ended])

    return await d.log.append(rs.name, decide)


@method("session.rotate", "agent")
async def rotate(call: Call) -> dict:
    """A new token for the caller's session; the one the request carried stops working before the
    answer leaves. Not logged (seed 001): no entry could name a token, and the session, its leases
    and its expiry are unchanged. Both rows are written in one transaction, so a restart knows the
    new token and not the old one."""
    d = call.ctx
    rs = call.repo_state()
    if rs.sessions[call.auth.session].level == "isolated":
        raise LoncaError("forbidden", "an isolated session's token is lonca run's: it rotates it, not the agent")
    old = d.tokens.rows[call.auth.token_hash]
    token = new_agent_token()
    row = TokenRow(token_hash=token_hash(token), kind="agent", repo=old.repo, session=old.session,
                   expires_ms=old.expires_ms)
    await d.db_write([row, TokenRow(**{**old.model_dump(), "ended": True})])
    d.tokens.add(row)
    d.tokens.rows.pop(old.token_hash, None)     # unknown from now on: unauthenticated
    return {"token": token}
