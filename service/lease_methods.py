"""lease.acquire, lease.release, lease.renew, lease.interest: deciding them (how their entries
change the state is in reducers.py). Answers that meet a holder carry `details` and `advice`."""
import re
import time as _time

from lonca.protocol import LoncaError
from lonca.symbols.twins import is_twin, one_definition

from . import cedar_policy
from . import scope as scopes
from . import random_ids, trunk_tables
from .lease_model import LeaseSet, any_conflict, items_conflict, member, split
from .log import Draft, allow, deny
from .methods import Call, method
from .state import RepoState

NAME_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,127}$")
DEFAULT_TTL_MS = 600_000




def check_items(value: list[dict]) -> list[dict]:
    """Lease items as they are logged (the schema checked their shape); `invalid` for a symbol
    that is no id (nothing is logged)."""
    out = []
    for it in value:
        sym = it["symbol"]
        if "#" not in sym or sym.startswith("#") or sym.endswith("#"):
            raise LoncaError("invalid", "a lease item's symbol is an id (path#Qualified.name); take ids from facts.preview")
        item = {"symbol": sym, "kind": it["kind"]}
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
            elif not all(NAME_RE.match(n) for n in it["names"]):
                out.append("invalid_names")
    return out


def detail(code: str, item: dict, holder_session: str | None = None, holder_agent: str | None = None,
           intent: str | None = None, expires_ms: int | None = None, set_id: str | None = None,
           pinned_to: str | None = None) -> dict:
    """One entry of `details` (seed 001, "details"): where a needed item stands. `names` are those
    of the insert it is about (for a free one, the names to reserve); null for other kinds."""
    return {"code": code, "symbol": item["symbol"], "needed_kind": item["kind"], "holder_session": holder_session,
            "holder_agent": holder_agent, "intent": intent, "expires_ms": expires_ms, "set": set_id,
            "pinned_to": pinned_to, "names": item.get("names")}


def held_detail(rs: RepoState, s: LeaseSet, item: dict, pinned: str | None = None) -> dict:
    """`item` held by another session's set `s` (pinned to a change, or until the set expires)."""
    rec = rs.sessions.get(s.session)
    return detail("lease_held", item, s.session, rec.agent if rec else None, s.intent,
                  None if pinned else s.expires_ms, s.id, pinned)


def _until(d: dict) -> str:
    if d["pinned_to"]:
        return f" until change {d['pinned_to']} leaves the queue"
    if d["expires_ms"]:
        return f" until {_time.strftime('%H:%M:%S', _time.gmtime(d['expires_ms'] / 1000))} UTC"
    return ""


def _who(d: dict) -> str:
    return f"{d['holder_agent']} (session {d['holder_session']})" if d["holder_agent"] else f"session {d['holder_session']}"


def _names(d: dict) -> str:
    return ", ".join(d["names"] or ())


def _sentence(d: dict) -> str | None:
    """What stands in the way, and what to do about it, for one detail; None for what does not."""
    sym, code = d["symbol"], d["code"]
    what = f"{sym} (adding {_names(d)})" if d["names"] else sym
    if code == "lease_held":
        return (f"{what} is held by {_who(d)} for \"{d['intent']}\"{_until(d)}: settle it with negotiate, "
                "or wait for it with lease.interest")
    if code == "lease_wanted":
        return (f"{what} is wanted by {_who(d)}, who waits for it for \"{d['intent']}\"{_until(d)} and goes "
                "first: settle it with negotiate, or wait in line with lease.interest")
    if code == "lease_reserved":
        return (f"{what} was freed and is reserved for {_who(d)}{_until(d)}: try again after that, "
                "or wait for it with lease.interest")
    if code == "name_reserved":
        return (f"{_names(d)} in {sym} is reserved by {_who(d)} for \"{d['intent']}\"{_until(d)}: "
                "choose another name, or settle it with negotiate")
    if code == "conflict":
        return (f"{sym} already defines {_names(d)}: choose another name, or take an edit lease on the "
                "existing definition and change it there")
    return None     # held_by_you, free: nobody is in the way


def advice(details: list[dict]) -> str | None:
    """The details in sentences for a model: who is in the way and what to do. Nothing about
    what the caller holds itself; None when nothing is in the way."""
    parts = [x for x in map(_sentence, details) if x]
    if not parts:
        return None
    more = f" ({len(parts) - 5} more in details)" if len(parts) > 5 else ""
    return "; ".join(parts[:5]) + more + "."


def conflicts(rs: RepoState, session: str, items: list[dict], now: int,
              nesting: dict[str, str] | None = None) -> tuple[list[str], list[dict]]:
    """Reasons and details for what stands between `session` and `items`: holders, waiting
    interests in their block window, and reservations. `nesting` (trunk_tables.nesting) narrows what
    the ids' text covers to what the tables nest."""
    reasons, details, seen = [], [], set()
    for s, held, want, pinned in rs.holders(items, session, now):
        if nesting and not items_conflict(held, want, nesting):
            continue
        reasons.append(f"lease_held:{want['symbol']}:{s.session}:{s.intent}")
        if (s.id, held["symbol"]) not in seen:
            seen.add((s.id, held["symbol"]))
            details.append(held_detail(rs, s, held, pinned))
    for code, waits, until in [("lease_wanted", i, i.blocks_until_ms) for i in rs.interests] + \
                              [("lease_reserved", r, r.until_ms) for r in rs.reservations]:
        if waits.session != session and now < until and any_conflict(waits.items, items, nesting):
            reasons.append(f"{code}:{waits.session}")
            rec = rs.sessions.get(waits.session)
            details.append(detail(code, waits.items[0], waits.session, rec.agent if rec else None, waits.intent, until))
    return list(dict.fromkeys(reasons)), details


def own_items(rs: RepoState, session: str, now: int) -> list[tuple[str, dict]]:
    """(set, item) of what `session` holds now, pinned items included."""
    out = []
    for sid in rs.sets_by_session.get(session, ()):
        s = rs.sets[sid]
        out += [(sid, item) for item, _ in rs.live_items(s, now)]
    return out


# -- one definition per name: names other sessions reserved, names trunk defines -----------------

def reservers(rs: RepoState, session: str, container: str, name: str, now: int) -> list[tuple[LeaseSet, str | None]]:
    """(set, pinned change) of other sessions whose insert on `container` names `name`, held now
    or pinned to a change in flight."""
    out = []
    for sid, held in rs.index.on_path(split(container)[0]).items():
        s = rs.sets[sid]
        if s.session == session:
            continue
        live = rs.set_live(s, now)
        for it, pinned in held:
            if (pinned is not None or live) and it["kind"] == "insert" and it["symbol"] == container \
                    and name in (it.get("names") or ()):
                out.append((s, pinned))
                break
    return out


def _reserved(rs: RepoState, session: str, container: str, name: str, now: int) -> tuple[list[str], list[dict]]:
    """name_reserved reasons and details for adding `name` into `container` (a new name, or a
    rename's)."""
    symbol = member(container, name)
    reasons, details = [], []
    for s, pinned in reservers(rs, session, container, name, now):
        reasons.append(f"name_reserved:{symbol}:{s.session}")
        rec = rs.sessions.get(s.session)
        details.append(detail("name_reserved", {"symbol": container, "kind": "insert", "names": [name]}, s.session,
                              rec.agent if rec else None, s.intent, None if pinned else s.expires_ms, s.id, pinned))
    return reasons, details


def _defined(container: str, name: str) -> tuple[str, dict]:
    """The reason and detail for adding `name` where `container` already defines it."""
    return f"conflict:{member(container, name)}", detail("conflict", {"symbol": container, "kind": "insert",
                                                                      "names": [name]})


def name_reasons(rs: RepoState, session: str, facts: dict, now: int,
                 containers: dict[str, tuple[str, str]]) -> tuple[list[str], list[dict]]:
    """A proposal's additions and renames onto a name another session reserved
    (name_reserved:<symbol>:<session>) or that the scope already defines (conflict:<symbol>: the
    facts number a second definition `~2`), unless the session leases that very definition
    (an edit lease on `p#f` may add an overload of `f`; one on the class or file does not).
    Renamed symbols are among the additions (facts); `containers` (Facts.containers) says
    where each is added, as its table wrote it."""
    reasons, details = [], []
    mine = {it["symbol"] for _, it in own_items(rs, session, now) if it["kind"] in ("edit", "rename")}
    for sym in facts["adds"]:
        path, qual = split(sym)
        if qual.endswith(".<append>"):
            continue
        container, name = containers[sym]
        if is_twin(qual) and one_definition(path, name) and member(container, name) not in mine:
            why, d = _defined(container, name)
            reasons.append(why)
            details.append(d)
        r, ds = _reserved(rs, session, container, name, now)
        reasons += r
        details += ds
    return reasons, details


def insert_name_reasons(rs: RepoState, session: str, items: list[dict], defined: set[tuple[str, str]],
                        now: int) -> tuple[list[str], list[dict]]:
    """An insert's names that another session reserved, or that trunk defines in that container."""
    reasons, details = [], []
    for it in items:
        if it["kind"] != "insert" or not isinstance(it.get("names"), list):
            continue
        for name in it["names"]:
            if (it["symbol"], name) in defined and one_definition(split(it["symbol"])[0], name):
                why, d = _defined(it["symbol"], name)
                reasons.append(why)
                details.append(d)
            reasons += _reserved(rs, session, it["symbol"], name, now)[0]     # the holder's detail is lease_held's
    return reasons, details


def _ttl(value, rs: RepoState) -> int:
    return min(DEFAULT_TTL_MS if value is None else value, rs.policy.max_ttl_ms)


@method("lease.acquire", "agent", writes=True)
async def acquire(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    items = check_items(p["items"])
    intent = p.get("intent") or ""
    set_id = p.get("set") or f"ls-{random_ids.token_hex(8)}"
    ttl = _ttl(p.get("ttl_ms"), rs)
    tables = await trunk_tables.read(call, sorted({split(it["symbol"])[0] for it in items}))  # before the log's turn
    defined, nesting = trunk_tables.defined_names(tables, items), trunk_tables.nesting(tables, items)
    warnings = trunk_tables.warnings(tables, items)

    def decide() -> Draft:
        now = d.now_ms()
        op = {"op": "lease.acquire", "set": set_id, "items": items, "intent": intent, "ttl_ms": ttl}
        reasons = item_problems(items, rs)
        if not intent.strip():
            reasons.append("intent_required")
        reasons += scopes.item_reasons(rs.sessions[me].scope, items, nesting)
        reasons += cedar_policy.decide(rs, cedar_policy.session_entity(rs, me), "lease.acquire", items=items)
        existing = rs.sets.get(set_id)
        if existing and existing.session != me:
            reasons.append("invalid_lease_set")
        if not existing and len(rs.sets_by_session.get(me, ())) >= rs.policy.lease_hold_limit_sets:
            reasons.append("lease_hold_limit")
        held, details = conflicts(rs, me, items, now, nesting)
        reasons += held
        named, named_details = insert_name_reasons(rs, me, items, defined, now)
        reasons += named
        details += named_details
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
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    set_id = call.params["set"]

    def decide() -> Draft:
        _, reasons = _own_set(rs, me, set_id)
        return Draft(actor=call.auth.actor, op={"op": "lease.release", "set": set_id},
                     decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"set": set_id, "details": [], "advice": None})
    return await d.log.append(rs.name, decide)


@method("lease.renew", "agent", writes=True)
async def renew(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    set_id = p["set"]
    ttl = _ttl(p.get("ttl_ms"), rs)

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
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    items = check_items(p["items"])
    intent = p.get("intent") or ""
    nesting = trunk_tables.nesting(await trunk_tables.read(call, trunk_tables.section_paths(items)), items)

    def decide() -> Draft:
        now = d.now_ms()
        reasons = item_problems(items, rs)
        if not intent.strip():
            reasons.append("intent_required")
        held, details = conflicts(rs, me, items, now, nesting)
        if not held:
            reasons.append("lease_free")
        if any(i.session == me and i.items == items for i in rs.interests):
            reasons.append("interest_exists")
        reasons += cedar_policy.decide(rs, cedar_policy.session_entity(rs, me), "lease.interest", items=items)
        op = {"op": "lease.interest", "items": items, "intent": intent}
        return Draft(actor=call.auth.actor, op=op, decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"set": None, "details": details, "advice": advice(details),
                                       "blocks_until_ms": e["time_ms"] + rs.policy.interest_block_ms if not reasons else None})
    return await d.log.append(rs.name, decide)
