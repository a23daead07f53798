"""lease.acquire, lease.release, lease.renew, lease.interest: deciding them (how their entries
change the state is in reducers.py). Answers that meet a holder carry `details` and `advice`."""
import re
import secrets
import time as _time

from lonca.protocol import LoncaError

from . import scope as scopes
from .lease_model import KINDS, LeaseSet, any_conflict
from .log import Draft, allow, deny
from .methods import Call, expect, expect_id, method, params_of
from .state import RepoState
from .symbol_methods import lease_warnings

NAME_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,127}$")
DEFAULT_TTL_MS = 600_000


def check_items(value) -> list[dict]:
    """Lease items in the seed's shape; `invalid` for anything else (nothing is logged)."""
    if not isinstance(value, list) or not value or len(value) > 1000:
        raise LoncaError("invalid", "items is a non-empty list of lease items (at most 1000)")
    out = []
    for it in value:
        if not isinstance(it, dict) or set(it) - {"symbol", "kind", "names"}:
            raise LoncaError("invalid", 'a lease item is {"symbol", "kind", "names"?}')
        sym, kind = it.get("symbol"), it.get("kind")
        if not isinstance(sym, str) or "#" not in sym or sym.startswith("#") or sym.endswith("#") or len(sym) > 1024:
            raise LoncaError("invalid", f"{sym!r} is not a symbol id (path#Qualified.name); take ids from facts.preview")
        if kind not in KINDS:
            raise LoncaError("invalid", f"a lease kind is one of {', '.join(KINDS)}")
        item = {"symbol": sym, "kind": kind}
        if "names" in it and it["names"] is not None:
            item["names"] = it["names"]
        out.append(item)
    return out


def item_problems(items: list[dict], rs: RepoState) -> list[str]:
    out = []
    for it in items:
        if it["kind"] == "shared" and not rs.policy.shared:
            out.append("shared_off")
        if "names" in it:
            if it["kind"] != "insert":
                out.append("names_need_insert")
            elif not isinstance(it["names"], list) or not all(isinstance(n, str) and NAME_RE.match(n) for n in it["names"]):
                out.append("invalid_names")
    return out


def detail(code: str, item: dict, holder_session: str | None = None, holder_agent: str | None = None,
           intent: str | None = None, expires_ms: int | None = None, set_id: str | None = None,
           pinned_to: str | None = None) -> dict:
    """One entry of `details` (seed 001, "details"): where a needed item stands."""
    return {"code": code, "symbol": item["symbol"], "needed_kind": item["kind"], "holder_session": holder_session,
            "holder_agent": holder_agent, "intent": intent, "expires_ms": expires_ms, "set": set_id,
            "pinned_to": pinned_to}


def held_detail(rs: RepoState, s: LeaseSet, item: dict, pinned: str | None = None) -> dict:
    """`item` held by another session's set `s` (pinned to a change, or until the set expires)."""
    rec = rs.sessions.get(s.session)
    return detail("lease_held", item, s.session, rec.agent if rec else None, s.intent,
                  None if pinned else s.expires_ms, s.id, pinned)


def advice(details: list[dict]) -> str | None:
    # what the caller holds itself is no one's to settle with (seed 001: "who is on it")
    held = [d for d in details if d["holder_session"] and d["code"] != "held_by_you"]
    if not held:
        return None
    parts = []
    for d in held[:5]:
        until = "until its change leaves the queue" if d["pinned_to"] else (
            f"until {_time.strftime('%H:%M:%S', _time.gmtime(d['expires_ms'] / 1000))} UTC" if d["expires_ms"] else "")
        parts.append(f"{d['symbol']} is {'wanted' if d['code'] == 'lease_wanted' else 'held'} by {d['holder_agent']} "
                     f"(session {d['holder_session']}) for \"{d['intent']}\" {until}".rstrip())
    return "; ".join(parts) + ". Settle it with negotiate, or wait for it with lease.interest."


def conflicts(rs: RepoState, session: str, items: list[dict], now: int) -> tuple[list[str], list[dict]]:
    """Reasons and details for what stands between `session` and `items`: holders, waiting
    interests in their block window, and reservations."""
    reasons, details, seen = [], [], set()
    for s, held, want, pinned in rs.holders(items, session, now):
        reasons.append(f"lease_held:{want['symbol']}:{s.session}:{s.intent}")
        if (s.id, held["symbol"]) not in seen:
            seen.add((s.id, held["symbol"]))
            details.append(held_detail(rs, s, held, pinned))
    for code, waits, until in [("lease_wanted", i, i.blocks_until_ms) for i in rs.interests] + \
                              [("lease_reserved", r, r.until_ms) for r in rs.reservations]:
        if waits.session != session and now < until and any_conflict(waits.items, items):
            reasons.append(f"{code}:{waits.session}")
            rec = rs.sessions.get(waits.session)
            details.append(detail(code, waits.items[0], waits.session, rec.agent if rec else None, waits.intent, until))
    return list(dict.fromkeys(reasons)), details


def _ttl(value, rs: RepoState) -> int:
    ttl = expect(value, int, "ttl_ms", nullable=True)
    ttl = DEFAULT_TTL_MS if ttl is None else ttl
    if ttl < 1:
        raise LoncaError("invalid", "ttl_ms is positive")
    return min(ttl, rs.policy.max_ttl_ms)


@method("lease.acquire", "agent", writes=True)
async def acquire(call: Call) -> dict:
    p = params_of(call, {"set", "items", "intent", "ttl_ms"}, {"items"})
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    items = check_items(p["items"])
    intent = expect(p.get("intent", ""), str, "intent", nullable=True) or ""
    given = expect(p.get("set"), str, "set", nullable=True)
    set_id = expect_id(given, "set", "a lease set id") if given else f"ls-{secrets.token_hex(8)}"
    ttl = _ttl(p.get("ttl_ms"), rs)
    d.rate.check(rs, me, d.now_ms())
    warnings = await lease_warnings(call, items)   # read before the log's turn: it parses files

    def decide() -> Draft:
        now = d.now_ms()
        op = {"op": "lease.acquire", "set": set_id, "items": items, "intent": intent, "ttl_ms": ttl}
        reasons = item_problems(items, rs)
        if not intent.strip():
            reasons.append("intent_required")
        reasons += scopes.item_reasons(rs.sessions[me].scope, items)
        existing = rs.sets.get(set_id)
        if existing and existing.session != me:
            reasons.append("invalid_lease_set")
        if not existing and len(rs.sets_by_session.get(me, ())) >= rs.policy.lease_hold_limit_sets:
            reasons.append("lease_hold_limit")
        held, details = conflicts(rs, me, items, now)
        reasons += held
        decision = deny(*reasons) if reasons else allow()

        def result(entry: dict) -> dict:
            ok = decision["outcome"] == "allow"
            return {"set": set_id if ok else None, "details": details, "advice": advice(details),
                    "expires_ms": entry["time_ms"] + ttl if ok else None, "warnings": warnings}
        return Draft(actor=call.auth.actor, op=op, decision=decision, result=result)

    return await d.log.append(rs.name, decide)


def _own_set(rs: RepoState, me: str, set_id: str) -> tuple[LeaseSet | None, list[str]]:
    s = rs.sets.get(set_id)
    if s is None:
        return None, ["unknown_lease_set"]
    if s.session != me:
        return s, ["not_own_lease"]
    return s, []


@method("lease.release", "agent", writes=True)
async def release(call: Call) -> dict:
    p = params_of(call, {"set"}, {"set"})
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    set_id = expect(p["set"], str, "set")
    d.rate.check(rs, me, d.now_ms())

    def decide() -> Draft:
        _, reasons = _own_set(rs, me, set_id)
        return Draft(actor=call.auth.actor, op={"op": "lease.release", "set": set_id},
                     decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"set": set_id, "details": [], "advice": None})
    return await d.log.append(rs.name, decide)


@method("lease.renew", "agent", writes=True)
async def renew(call: Call) -> dict:
    p = params_of(call, {"set", "ttl_ms"}, {"set"})
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    set_id = expect(p["set"], str, "set")
    ttl = _ttl(p.get("ttl_ms"), rs)
    d.rate.check(rs, me, d.now_ms())

    def decide() -> Draft:
        now = d.now_ms()
        s, reasons = _own_set(rs, me, set_id)
        if s and not reasons:
            if not s.items or not rs.set_live(s, now):
                reasons.append("lease_expired")
            elif (now - s.acquired_ms >= rs.policy.max_hold_ms and s.wanted_ms is not None
                  and now - s.wanted_ms < rs.policy.max_ttl_ms):
                reasons.append("lease_hold_limit")
        return Draft(actor=call.auth.actor, op={"op": "lease.renew", "set": set_id, "ttl_ms": ttl},
                     decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"set": set_id, "details": [], "advice": None,
                                       "expires_ms": e["time_ms"] + ttl if not reasons else None})
    return await d.log.append(rs.name, decide)


@method("lease.interest", "agent", writes=True)
async def interest(call: Call) -> dict:
    p = params_of(call, {"items", "intent"}, {"items"})
    d, rs, me = call.daemon, call.repo_state(), call.auth.session
    items = check_items(p["items"])
    intent = expect(p.get("intent", ""), str, "intent", nullable=True) or ""
    d.rate.check(rs, me, d.now_ms())

    def decide() -> Draft:
        now = d.now_ms()
        reasons = item_problems(items, rs)
        if not intent.strip():
            reasons.append("intent_required")
        held, details = conflicts(rs, me, items, now)
        if not held:
            reasons.append("lease_free")
        if any(i.session == me and i.items == items for i in rs.interests):
            reasons.append("interest_exists")
        op = {"op": "lease.interest", "items": items, "intent": intent}
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"set": None, "details": details, "advice": advice(details),
                                       "blocks_until_ms": e["time_ms"] + rs.policy.interest_block_ms if not reasons else None})
    return await d.log.append(rs.name, decide)
