"""Agent sessions: session.start (a human's signed operation), session.heartbeat, session.end."""

from lonca.protocol import LoncaError

from .auth import new_agent_token, token_hash
from .hook_methods import carried_paths, local_files
from .log import Draft, allow
from .methods import Call, method
from .state import RepoState
from .store import TokenRow


def full_scope(scope: dict) -> dict:
    """A scope with every field, defaults filled (its types are the schema's, service/schemas.py)."""
    return {"paths": scope.get("paths", ["**"]), "symbols": scope.get("symbols"), "ops": scope.get("ops", []),
            "max_files": scope.get("max_files"), "max_lines": scope.get("max_lines"), "scratch": scope.get("scratch", [])}


def decide_session_start(call: Call, rs: RepoState, op: dict) -> Draft:
    """The decision on a signed session.start: the op is logged as signed, unchanged."""
    d = call.ctx
    now = d.now_ms()
    sid, expires = op["session"], op["expires_ms"]
    if sid in rs.sessions:
        raise LoncaError("invalid", f"the session {sid} exists; sign a new session id")
    if op.get("scope") is not None and full_scope(op["scope"]) != op["scope"]:
        raise LoncaError("invalid", "op.scope must be complete: paths, symbols, ops, max_files, max_lines, scratch")
    if not now < expires <= now + rs.policy.session_max_ttl_ms:
        raise LoncaError("invalid", "op.expires_ms is in the future and within the policy's session lifetime")
    if op.get("scope") is None:
        raise LoncaError("invalid", "op.scope is required")
    token = new_agent_token()
    row = TokenRow(token_hash=token_hash(token), kind="agent", repo=rs.name, session=sid, expires_ms=expires)

    def result(entry: dict) -> dict:
        return {"token": token, "session": sid, "expires_ms": expires}

    return Draft(actor=call.auth.actor, op=op, decision=allow(), rows=[row], result=result,
                 after_commit=[lambda: d.tokens.add(row)])


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

        def result(entry: dict) -> dict:
            own = [rs.sets[s] for s in sorted(rs.sets_by_session.get(sid, ())) if rs.sets[s].items]
            return {"now_ms": entry["time_ms"], "timeout_ms": rs.policy.heartbeat_timeout_ms,
                    "max_ttl_ms": rs.policy.max_ttl_ms, "leases": [{"set": s.id, "expires_ms": s.expires_ms} for s in own]}
        return Draft(actor=call.auth.actor, op=op, decision=allow(), result=result)

    return await d.log.append(rs.name, decide)


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
