"""What sessions tell each other and learn: events, inbox, negotiate, cap.attenuate."""
import secrets

from . import scope as scopes
from .auth import new_agent_token, token_hash
from .lease_model import split
from .log import Draft, allow, deny
from .methods import Call, method
from .session_methods import full_scope
from .state import RepoState, SessionRec, State, register
from .store import TokenRow

INBOX_KINDS = ("message", "lease_received", "symbols_changed", "reserved")


def session_events(rs: RepoState, session: str, start: int, now: int) -> list[dict]:
    out = [e for e, to in rs.events if e.get("seq", 0) >= start and session in to]
    out += [{"kind": "reserved", "items": r.items, "until_ms": r.until_ms}
            for r in rs.reservations if r.session == session and r.until_ms > now]
    return out


@method("events", "agent")
async def events(call: Call) -> dict:
    rs = call.repo_state()
    start = call.params.get("from") or 1
    return {"events": session_events(rs, call.auth.session, start, call.daemon.now_ms()), "next": rs.next_seq}


def inbox_text(evs: list[dict]) -> str | None:
    lines = []
    for e in evs:
        if e["kind"] == "message":
            m = e["message"]
            body = str(m.get("note") or m.get("reason") or "")[:600]
            lines.append(f"Another agent's words (session {e['from']}, thread {e['thread']}, {m.get('type')}): {body}")
        elif e["kind"] == "lease_received":
            lines.append(f"You received lease set {e['set']} from session {e['from']}.")
        elif e["kind"] == "symbols_changed":
            lines.append(f"Change {e['change']} changes symbols your leases touch: {', '.join(e['symbols'][:10])}.")
        elif e["kind"] == "reserved":
            lines.append(f"Reserved for you until {e['until_ms']} ms: {', '.join(i['symbol'] for i in e['items'])}; acquire it now.")
    return "\n".join(lines) or None


@method("inbox", "agent")
async def inbox(call: Call) -> dict:
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    told = d.told.setdefault((rs.name, me), set())
    fresh = []
    for e in session_events(rs, me, 1, d.now_ms()):
        key = (e["kind"], e.get("seq"), e.get("until_ms"))
        if e["kind"] in INBOX_KINDS and key not in told:
            told.add(key)
            fresh.append(e)
    return {"events": fresh, "text": inbox_text(fresh)}


@method("negotiate", "agent", writes=True)
async def negotiate(call: Call) -> dict:
    p = call.params
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    thread, to, msg = p["thread"], p["to_session"], p["message"]
    kind = msg["type"]
    d.rate.check(rs, me, d.now_ms())

    def decide() -> Draft:
        now = d.now_ms()
        reasons = []
        target = rs.sessions.get(to)
        if target is None or not target.active(now):
            reasons.append("unknown_session")
        if kind == "yield":
            s = rs.sets.get(msg.get("set"))
            if msg.get("to") is not None and msg["to"] != to:
                reasons.append("yield_to_another_session")
            if s is None:
                reasons.append("unknown_lease_set")
            elif s.session != me:
                reasons.append("not_own_lease")
            elif s.pinned:
                reasons.append("lease_pinned")
            elif not rs.set_live(s, now):
                reasons.append("lease_expired")
            elif target is not None and msg.get("to"):
                reasons += sorted({f"scope_path:{split(i['symbol'])[0]}" for i in s.items
                                   if not scopes.path_in(target.scope, split(i["symbol"])[0])})
        op = {"op": "negotiate", "thread": thread, "to_session": to, "message": msg}
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"thread": thread})
    return await d.log.append(rs.name, decide)


@register("negotiate")
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
            rs.event({"kind": "lease_received", "seq": entry["seq"], "set": s.id, "from": me}, to)
        else:
            rs.drop_set(s)


@method("cap.attenuate", "agent", writes=True)
async def attenuate(call: Call) -> dict:
    p = call.params
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    agent, expires = p["agent"], p["expires_ms"]
    child_scope = full_scope(p["scope"])
    lent = p.get("leases") or []
    d.rate.check(rs, me, d.now_ms())
    child = f"{me}.{secrets.token_hex(4)}"[:64]
    token = new_agent_token()

    def decide() -> Draft:
        now = d.now_ms()
        parent = rs.sessions[me]
        reasons = [f"scope_widening:{w}" for w in scopes.narrower(child_scope, parent.scope)]
        if not now < expires <= parent.expires_ms:
            reasons.append("scope_widening:expires_ms")
        for sid in lent:
            s = rs.sets.get(sid)
            if s is None:
                reasons.append("unknown_lease_set")
            elif s.session != me:
                reasons.append("not_own_lease")
        op = {"op": "cap.attenuate", "parent": me, "child": child, "agent": agent, "scope": child_scope, "expires_ms": expires}
        if lent:
            op["leases"] = lent
        row = TokenRow(token_hash=token_hash(token), kind="agent", repo=rs.name, session=child, expires_ms=expires)

        def result(entry: dict) -> dict:
            if reasons:
                return {"session": None}
            d.tokens.add(row)
            return {"session": child, "token": token}
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons) if reasons else allow(),
                     rows=[] if reasons else [row], result=result)
    return await d.log.append(rs.name, decide)


@register("cap.attenuate")
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
