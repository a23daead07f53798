"""What sessions tell each other and learn: events, inbox, negotiate, cap.attenuate."""
import bisect

from . import random_ids
from . import scope as scopes
from .auth import new_agent_token, token_hash
from .lease_model import split
from .log import Draft, allow, deny
from .methods import Call, method
from .state import RepoState
from .store import TokenRow

INBOX_KINDS = ("message", "lease_received", "symbols_changed", "reserved", "comment")


def session_events(rs: RepoState, session: str, start: int, now: int) -> list[dict]:
    """The session's events from seq `start` (its own list, searched by seq), then its live
    reservations."""
    kept = rs.events.get(session, [])
    out = kept[bisect.bisect_left(kept, start, key=lambda e: e["seq"]):]
    out += [{"kind": "reserved", "items": r.items, "until_ms": r.until_ms}
            for r in rs.reservations if r.session == session and r.until_ms > now]
    return out


@method("events", "agent")
async def events(call: Call) -> dict:
    rs = call.repo_state()
    start = call.params.get("from") or 1
    return {"events": session_events(rs, call.auth.session, start, call.ctx.now_ms()), "next": rs.next_seq}


def inbox_line(e: dict) -> str:
    """One event of the inbox, for a model."""
    if e["kind"] == "message":
        m = e["message"]
        body = str(m.get("note") or m.get("reason") or "")[:600]
        return f"Another agent's words (session {e['from']}, thread {e['thread']}, {m.get('type')}): {body}"
    if e["kind"] == "comment":
        where = e["path"] + (f" line {e['line']}" if e.get("line") else "") + (f" ({e['symbol']})" if e.get("symbol") else "")
        ask = "asks for changes" if e["request_changes"] else "comments"
        return (f"A human reviewer (human:{e['human']}) {ask} on your change {e['change']} at {where}, the reviewer's words: "
                f"{e['body'][:600]}" + (" Propose a new version of the change that answers it." if e["request_changes"] else ""))
    if e["kind"] == "lease_received":
        return (f"You received lease set {e['set']} from session {e['from']}: you hold it now, with the "
                "time it had; edit and propose (do not acquire it again), renew it if you need longer.")
    if e["kind"] == "symbols_changed":
        if e["change"] is None:  # a human's import.external
            return f"An import from upstream changed symbols your leases touch: {', '.join(e['symbols'][:10])}; sync."
        who = "A human's change" if e["from"] is None else "Change"  # a human's own change has no session
        return f"{who} {e['change']} changes symbols your leases touch: {', '.join(e['symbols'][:10])}."
    return f"Reserved for you until {e['until_ms']} ms: {', '.join(i['symbol'] for i in e['items'])}; acquire it now."


def inbox_text(evs: list[dict]) -> str | None:
    return "\n".join(inbox_line(e) for e in evs) or None


@method("inbox", "agent")
async def inbox(call: Call) -> dict:
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    told = d.told.setdefault((rs.name, me), Told())
    fresh, reserved = [], set()
    for e in session_events(rs, me, told.seq + 1, d.now_ms()):
        if "seq" in e:  # logged: told once, in seq order
            told.seq = max(told.seq, e["seq"])
            if e["kind"] in INBOX_KINDS:
                fresh.append(e)
        else:  # a reservation: told once while it lasts
            key = (e["until_ms"], tuple(i["symbol"] for i in e["items"]))
            reserved.add(key)
            if key not in told.reserved:
                fresh.append(e)
    told.reserved = reserved
    # each event with its own line, so a client can attribute each to its sender (Lonis blocks)
    return {"events": [{**e, "text": inbox_line(e)} for e in fresh], "text": inbox_text(fresh)}


class Told:
    """What `inbox` told a session: every logged event up to `seq`, and the reservations still
    live that it told of. Bounded whatever the history (docs/decisions.md, "Memory that does not
    grow with history")."""

    def __init__(self):
        self.seq = 0
        self.reserved: set[tuple] = set()


@method("negotiate", "agent", writes=True)
async def negotiate(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    thread, to, msg = p["thread"], p["to_session"], p["message"]
    kind = msg["type"]

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


@method("cap.attenuate", "agent", writes=True)
async def attenuate(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    agent, expires = p["agent"], p["expires_ms"]
    child_scope = scopes.full_scope(p["scope"])
    lent = p.get("leases") or []
    child = f"{me}.{random_ids.token_hex(4)}"[:64]
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
            return {"session": None} if reasons else {"session": child, "token": token}
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons) if reasons else allow(),
                     rows=[] if reasons else [row], result=result,
                     after_commit=[] if reasons else [lambda: d.tokens.add(row)])
    return await d.log.append(rs.name, decide)
