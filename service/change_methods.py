"""Proposals: change.propose and facts.preview (facts, claim, scope, leases, policy), and the
readers change.get, change.resolve, change.diff; change.withdraw. How their entries change the state is in reducers.py."""
import asyncio
import json
from typing import NamedTuple

import pygit2

from lonca.protocol import LoncaError
from lonca.queue.checks import TAIL_BYTES
from lonca.symbols import SYMBOLS_ENGINE, compare_claim

from . import cedar_policy
from . import scope as scopes
from .change_build import (NotQuick, Previewed, build_commit, check_files, commit_exists, facts_json, facts_of,
                           new_change_id, previewed, quick_base)
from .lease_methods import advice, detail, held_detail, name_reasons, own_items
from .lease_model import FILE, covers, items_conflict, member, split
from .log import Draft, allow, deny
from .methods import Call, method
from .policy import LEVELS, Policy
from .read_methods import find_change, on_loop_store, on_store
from .reducers import touched_paths
from .state import ChangeRec, RepoState
from .store import read_log

DIFF_CAP = 2 * 1024 * 1024
STATUS = {"allow": "queued", "escalate": "pending", "deny": "denied"}  # a proposal's status by its outcome


# -- what leases the facts need ------------------------------------------------------------------

def needed(facts: dict, rs: RepoState, containers: dict[str, tuple[str, str]]) -> list[dict]:
    """Lease items a change with these facts needs, most covering first, each once. An addition
    inserts into its container as its table wrote it (`containers`, from the facts: a name may
    hold dots, so the id can not tell)."""
    optimistic = rs.policy.unparsed_files == "optimistic"
    skip = set(facts["unparsed_files"]) if optimistic else set()
    whole = {p for p in facts["added_files"] + facts["deleted_files"]} - skip
    out: dict[str, dict] = {}
    for p in sorted(whole):
        out[f"{p}#{FILE}"] = {"symbol": f"{p}#{FILE}", "kind": "edit"}
    renamed = {old: new for old, new in facts["renames"]}
    renamed_new = set(renamed.values())

    def add(item):
        path = split(item["symbol"])[0]
        if path in whole or path in skip:
            return
        key = item["symbol"] + "|" + item["kind"]
        prev = out.get(key)
        if prev and item.get("names"):
            prev["names"] = sorted(set(prev.get("names", [])) | set(item["names"]))
        elif not prev:
            out[key] = item
    for old in sorted(renamed):
        add({"symbol": old, "kind": "rename"})
    for sym in sorted(set(facts["edits"]) | set(facts["deletes"])):
        if sym not in renamed and sym not in renamed_new:
            add({"symbol": sym, "kind": "edit"})
    for sym in sorted(facts["adds"]):
        if sym in renamed_new:
            continue
        path, qual = split(sym)
        if qual.endswith(".<append>"):
            add({"symbol": f"{path}#{qual[:-len('.<append>')]}", "kind": "insert"})
        else:
            container, name = containers[sym]
            add({"symbol": container, "kind": "insert", "names": [name]})
    return list(out.values())


def satisfied(need: dict, have: dict, nesting: dict[str, str] | None = None) -> bool:
    """Whether one held item answers one need (containment as the tables nest: lease_model)."""
    hk, hs, ns = have["kind"], have["symbol"], need["symbol"]
    if need["kind"] == "insert":
        names = need.get("names") or []
        if hk == "insert":
            return hs == ns and (have.get("names") is None or set(names) <= set(have["names"]))
        return hk in ("edit", "rename", "shared") and (
            covers(hs, ns, nesting) or bool(names) and all(covers(hs, member(ns, n), nesting) for n in names))
    return hk in ("edit", "rename", "shared") and covers(hs, ns, nesting)


def lease_standing(rs: RepoState, session: str | None, needs: list[dict], now: int,
                   nesting: dict[str, str] | None = None):
    """(missing needs, details, the own (set, item) pairs that satisfy the rest)."""
    own = own_items(rs, session, now) if session else []
    missing, details, used = [], [], []
    for need in needs:
        # an insert's names may be held in one item or one item per name
        parts = [{**need, "names": [n]} for n in need["names"]] if need.get("names") else [need]
        found = [[(sid, it) for sid, it in own if satisfied(part, it, nesting)] for part in parts]
        if all(found):
            used += [m for matches in found for m in matches]
            own_set = rs.sets[found[0][0][0]]
            details.append(detail("held_by_you", need, session, rs.sessions[session].agent, own_set.intent,
                                  own_set.expires_ms, own_set.id))
            continue
        if any(found):      # what is missing is the names not held
            need = {**need, "names": [p["names"][0] for p, f in zip(parts, found) if not f]}
        missing.append(need)
        holders = [h for h in rs.holders([need], session or "", now) if items_conflict(h[1], h[2], nesting)]
        if not holders:
            details.append(detail("free", need))
        details += [held_detail(rs, s, need, pinned) for s, _held, _want, pinned in holders]
    return missing, details, used


# -- preparing a proposal (outside the writer: git objects and facts) -----------------------------

class Prepared(NamedTuple):
    """A proposal's commit and facts, made outside the writer (git objects, symbols)."""
    commit: str
    facts: dict                 # facts_json
    syntax_errors: list[str]
    mismatches: list[dict]      # the claim against the facts (compare_claim)
    base_map: dict
    trunk_map: dict
    containers: dict            # Facts.containers: added id -> (container, name)
    nesting: dict               # Facts.nesting: id -> container, where names may hold dots


async def prepare(call: Call, rs: RepoState, base: str, files: list[dict], message: str, author: str,
                  claim: dict | None = None) -> Prepared | None:
    """A proposal's commit and facts, on a thread; None when `base` is no commit of the
    repository. Its `claim` is compared with the facts (a human's change has none: the daemon
    writes its claim from them)."""
    d = call.ctx
    trunk, case_twins = rs.trunk, rs.policy.case_twins  # read on the loop: the thread reads no live state
    redacted = frozenset(rs.redacted)

    def work(store: pygit2.Repository) -> Prepared | None:
        if not commit_exists(store, base):
            return None
        base_map = d.tree_maps.get(store, base)
        commit, new_map = build_commit(store, base, files, message, author, d.now_ms(), base_map, case_twins)
        facts = facts_of(store, d.symbols, base, base_map, new_map, files, None, redacted)
        mismatches = compare_claim(claim, facts) if claim is not None else []
        return Prepared(commit, facts_json(facts), list(facts.syntax_errors), mismatches, base_map,
                        d.tree_maps.get(store, trunk), facts.containers, facts.nesting)
    async with d.builds:    # the pool's other threads stay for previews and reads
        prepared = await on_store(call, work)
    if prepared is not None:
        d.warmer.ask(rs.name, rs.trunk)    # the next proposal on trunk is quicker
    return prepared


async def prepare_preview(call: Call, rs: RepoState, base: str, files: list[dict]) -> Previewed | None:
    """A preview's facts; None when `base` is no commit of the repository. Small and held
    (quick_base), on the loop with its own handle: no thread and no GIL hand-off, which cost a
    preview more than its work (docs/decisions.md, "Small previews judged on the event loop"); else on
    a thread at once, as its agent waits for it."""
    d = call.ctx
    case_twins, redacted = rs.policy.case_twins, frozenset(rs.redacted)   # read on the loop

    def on_loop(store: pygit2.Repository) -> Previewed | None:
        held_map = quick_base(store, d.tree_maps, d.symbols, base, files)
        if held_map is None:
            raise NotQuick(base)
        return previewed(store, d.symbols, base, held_map, files, case_twins, redacted, True)

    def on_thread(store: pygit2.Repository) -> Previewed | None:
        if not commit_exists(store, base):
            return None
        return previewed(store, d.symbols, base, d.tree_maps.get(store, base), files, case_twins, redacted, False)
    try:
        found = on_loop_store(call, on_loop)
    except NotQuick:
        found = await on_store(call, on_thread)
    if found is not None:
        d.warmer.ask(rs.name, rs.trunk)    # the next proposal on trunk is quicker
    return found


def decide_proposal(rs: RepoState, session: str, change: str | None, facts: dict, base: str, base_map, trunk_map,
                    now: int, mismatches: list[dict], containers: dict, nesting: dict) -> tuple[dict, list[dict], list]:
    """(decision, details, used lease items) for a proposal by agent session `session`; `change`
    is the change it is a new version of, or None; `containers` and `nesting` as in Prepared."""
    deny_r, esc_r, info_r = [], [], []
    if rs.frozen:
        deny_r.append(f"frozen:{rs.frozen}")
    deny_r += [f"claim_mismatch:{m['field']}" for m in mismatches]
    at = rs.trunks.position(base)   # read before the decision (trunks.find in propose)
    if at is None:
        deny_r.append("unknown_base")
    elif rs.integrations - at > rs.policy.max_behind:
        deny_r.append("stale_trunk")
    deny_r += rs.quota_reasons(session, now)
    paths = touched_paths(facts)
    for p in facts["added_files"]:
        if p in trunk_map and p not in base_map:
            deny_r.append(f"created_since_base:{p}")
    sc = rs.sessions[session].scope
    deny_r += [f"scope_path:{p}" for p in paths if not scopes.path_in(sc, p)]
    deny_r += cedar_policy.decide(rs, cedar_policy.session_entity(rs, session), "change.propose", paths, change=change or "")
    touched = facts["edits"] + facts["adds"] + facts["deletes"]
    deny_r += [f"scope_symbol:{s}" for s in touched if not scopes.symbol_in(sc, s, nesting)]
    for op, syms in (("edit", facts["edits"]), ("insert", facts["adds"]), ("delete", facts["deletes"]),
                     ("rename", facts["renames"])):
        if syms and not scopes.op_in(sc, op):
            deny_r.append(f"scope_op:{op}")
    if sc.get("max_files") is not None and len(paths) > sc["max_files"]:
        deny_r.append("scope_max_files")
    if sc.get("max_lines") is not None and facts["lines_added"] + facts["lines_removed"] > sc["max_lines"]:
        deny_r.append("scope_max_lines")
    missing, details, used = lease_standing(rs, session, needed(facts, rs, containers), now, nesting)
    deny_r += [f"lease_missing:{m['symbol']}" for m in missing]
    named, named_details = name_reasons(rs, session, facts, now, containers)
    deny_r += named
    details += named_details
    if rs.policy.agent_changes == "human":
        esc_r.append("review_required")
    esc_r += [f"critical_path:{p}" for p in paths if rs.policy.critical(p)]
    esc_r += observation_reasons(rs.sessions[session], paths, rs.policy)
    esc_r += [f"unread_file:{p}" for p in facts["unread_files"]]
    for sym in facts["signature_changes"]:
        info_r.append(f"signature_change:{sym}")
    info_r += [f"affected_lease:{rs.sets[sid].session}:{sid}"
               for sid in sorted(leases_on(rs, facts["affected"], session, now))]
    if deny_r:
        return deny(*deny_r, *esc_r, *info_r), details, []
    ws = rs.workspace_sessions(session)
    # a new version of a pending change takes its place itself: it replaces only the others
    info_r += [f"replaces:{c}" for c in sorted(c.id for c in rs.changes.values()
                                                if c.session in ws and c.status["status"] == "pending" and c.id != change)]
    outcome = "escalate" if esc_r else "allow"
    return {"outcome": outcome, "reasons": list(dict.fromkeys(esc_r + info_r))}, details, used


def observation_reasons(rec, paths: list[str], policy: Policy) -> list[str]:
    """What a session's observation level and taint escalate (seed 001, reason codes): a taint
    escalates every proposal (unhooked_session for hooks that did not run, else tainted_session)
    and names critical paths; a level below what the policy requires of the session's harness
    escalates unobserved_session; a session whose hooks run escalates each path they never saw a
    write tool write (a shell command, or a file changed outside the harness)."""
    if rec.taint:
        kind = "unhooked" if rec.taint == "unhooked_session" else "tainted"
        return [f"{kind}_session"] + ([f"{kind}_critical_path"] if any(policy.critical(p) for p in paths) else [])
    out = []
    if LEVELS.index(rec.level) < LEVELS.index(policy.level_required(rec.harness)):
        out.append("unobserved_session")
    if rec.level != "unobserved":
        out += [f"unobserved_write:{p}" for p in paths if p not in rec.written]
    return out


def leases_on(rs: RepoState, symbols: list[str], session: str | None, now: int) -> set[str]:
    """Sets of other sessions holding now (or pinned) an item that covers one of `symbols` or
    that one covers; looked up by path in the lease index, not over every set."""
    found: set[str] = set()
    for sym in symbols:
        for sid, held in rs.index.on_path(split(sym)[0]).items():
            s = rs.sets[sid]
            if sid in found or s.session == session:
                continue
            live = rs.set_live(s, now)
            if any((pinned is not None or live) and (covers(it["symbol"], sym) or covers(sym, it["symbol"]))
                   for it, pinned in held):
                found.add(sid)
    return found


def pins_of(used: list[tuple[str, dict]]) -> list[dict]:
    by_set: dict[str, list] = {}
    for sid, item in used:
        if item not in by_set.setdefault(sid, []):
            by_set[sid].append(item)
    return [{"set": s, "items": items} for s, items in sorted(by_set.items())]


@method("change.propose", "agent", writes=True)
async def propose(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    base = p["base"]
    files = check_files(p["files"])
    if not files:
        raise LoncaError("invalid", "a proposal changes at least one file")
    claim = p.get("claim") or {}
    change = p.get("change")
    if change is not None:
        await find_change(rs, change)   # a settled change's record in memory for the decision
    await rs.trunks.find(base)          # and the base's place in trunk's history
    intent = claim.get("intent") or ""
    prepared = await prepare(call, rs, base, files, intent or "lonca change", call.auth.agent, claim)
    return await d.log.append(rs.name, lambda: _decide_propose(call, rs, me, change, base, claim, prepared))


def _decide_propose(call: Call, rs: RepoState, me: str, change: str | None, base: str, claim: dict,
                    prepared: Prepared | None) -> Draft:
    d = call.ctx
    now = d.now_ms()
    if prepared is None:
        commit, facts, syntax, mismatches = None, None, [], []
        decision, details, used = deny("unknown_base"), [], []
    else:
        commit, facts, syntax, mismatches = prepared.commit, prepared.facts, prepared.syntax_errors, prepared.mismatches
        decision, details, used = decide_proposal(rs, me, change, facts, base, prepared.base_map, prepared.trunk_map,
                                                  now, mismatches, prepared.containers, prepared.nesting)
    cid = change or rs.settled.mint(new_change_id())
    if change is not None:
        old = rs.change(change)
        if old is None or old.session not in rs.workspace_sessions(me):
            raise LoncaError("invalid", "change names no change of this workspace; send null for a new one")
        if old.status["status"] == "queued" or old.status["status"] == "integrated":
            raise LoncaError("invalid", f"change {change} is {old.status['status']}; propose a new change")
    op = {"op": "change.propose", "change": cid, "commit": commit, "base": base, "claim": claim}
    if decision["outcome"] != "deny":
        op["pins"] = pins_of(used)

    def result(entry: dict) -> dict:
        out = {"change": cid, "commit": commit, "facts": facts, "syntax_errors": syntax,
               "details": [x for x in details if x["code"] != "held_by_you"], "advice": advice(details),
               "status": STATUS[decision["outcome"]]}
        if mismatches:
            out["claim_mismatch"] = mismatches
        return out
    return Draft(actor=call.auth.actor, op=op, decision=decision, facts=facts,
                 symbols_engine=SYMBOLS_ENGINE, result=result,
                 after_commit=[d.queue_wake] if decision["outcome"] == "allow" else [])


@method("facts.preview", "agent", path_scoped=True)
async def preview(call: Call) -> dict:
    p = call.params
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    since = d.log.failures  # in the loop's step that checked the credential, before any wait
    base = p["base"]
    files = check_files(p["files"])
    prepared = await prepare_preview(call, rs, base, files)
    if prepared is None:
        raise LoncaError("not_found", f"no commit {base} in this repository")
    facts = prepared.facts
    needs = needed(facts, rs, prepared.containers)
    missing, details, _used = lease_standing(rs, me, needs, d.now_ms(), prepared.nesting)
    free = {x["symbol"] for x in details if x["code"] == "free"}
    no_lease = sorted(facts["unparsed_files"]) if rs.policy.unparsed_files == "optimistic" else []
    # what the answer read of the log's state: the leases on these paths, the sets there and
    # their sessions (live or not), this session (its credential and its own sets); no other
    # entry in flight changes the answer, so it does not wait for those
    paths = {split(n["symbol"])[0] for n in needs} | set(touched_paths(facts))
    sessions = {me} | {rs.sets[sid].session for path in paths for sid in rs.index.by_path.get(path, ())}
    await d.log.settled_for(rs.name, paths, sessions, since)
    return {"facts": facts, "syntax_errors": prepared.syntax_errors, "leases": details,
            "acquire": [m for m in missing if m["symbol"] in free], "no_lease": no_lease, "advice": advice(details)}


@method("change.withdraw", "agent", writes=True)
async def withdraw(call: Call) -> dict:
    change = call.params["change"]
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    rec = await find_change(rs, change)
    if rec is None:
        raise LoncaError("not_found", f"no change {change}")
    if change in d.verifying:
        raise LoncaError("verifying", "its checks are running; send it again once they end, if it is still queued")

    def decide() -> Draft:
        reasons = []
        if rec.session not in rs.workspace_sessions(me):
            reasons.append("not_own_change")
        elif rec.status["status"] not in ("pending", "queued"):
            reasons.append(f"not_in_queue:{rec.status['status']}")
        return Draft(actor=call.auth.actor, op={"op": "change.withdraw", "change": change},
                     decision=deny(*reasons) if reasons else allow(),
                     result=lambda e: {"change": change})
    return await d.log.append(rs.name, decide)


async def claim_and_facts(call: Call, rec: ChangeRec) -> tuple[dict, dict]:
    """What the change claimed and its facts: from memory while it is in the queue or waits for
    a human, from its proposal entry once it left (ChangeRec.settle)."""
    if rec.claim is not None:
        return rec.claim, rec.facts
    rows = await asyncio.to_thread(read_log, call.ctx.engine, call.repo_state().name, rec.proposed_seq, 1)
    entry = json.loads(rows[0].entry)
    return entry["op"]["claim"], entry.get("facts") or {}


def change_json(rs: RepoState, rec: ChangeRec, claim: dict, facts: dict) -> dict:
    runs = rs.policy.runs(rec)
    return {"change": rec.id, "actor": rec.actor, "commit": rec.commit, "base": rec.base, "claim": claim,
            "facts": facts, "status": rec.status, "provenance": rec.provenance, "proposed_seq": rec.proposed_seq,
            "created_ms": rec.created_ms, "version": rec.version, "versions": rec.versions, "checks": rec.checks,
            "runs": runs, "integrate_seq": rec.integrate_seq, "integrate_decision": rec.integrate_decision,
            "evidence": rec.evidence, "intent": rec.intent, "paths": rec.paths, "session": rec.session,
            "review_seq": rec.review_seq, "review_commit": rec.review_commit, "review_evidence": rec.review_evidence,
            "priority_seq": rec.priority_seq}


def _by_check(attestations: list[dict]) -> list[list[dict]]:
    """The attestations of one entry, each check's attempts together: a check's first attempt
    (details.attempt "1", or none in a log from before retries) starts its group."""
    groups: list[list[dict]] = []
    for a in attestations:
        if groups and (a.get("details") or {}).get("attempt", "1") != "1":
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def evidence_of(store: pygit2.Repository, attempts: list[dict], redacted: frozenset[str] = frozenset()) -> dict:
    """change.get's evidence of one check from its attempts' attestations in the log: the last
    attempt's result and output tail (its `log` blob, null when a human redacted it), the time of
    every attempt."""
    a = attempts[-1]
    det = a.get("details") or {}
    text, truncated = None, det.get("log_truncated") == "true"
    if a.get("log") and a["log"] not in redacted:
        try:
            data = store[a["log"]].data
            truncated = truncated or len(data) > TAIL_BYTES
            text = data[-TAIL_BYTES:].decode("utf-8", "replace")
        except (KeyError, ValueError):
            text = None

    def num(d: dict, k: str) -> int | None:
        return int(d[k]) if d.get(k, "").lstrip("-").isdigit() else None
    times = [num(x.get("details") or {}, "duration_ms") for x in attempts]
    return {"check": a["check"], "result": a["result"], "exit": num(det, "exit"),
            "duration_ms": None if None in times else sum(t for t in times if t is not None),
            "attempts": num(det, "attempts"), "sandbox": None, "error": det.get("error"), "details": det,
            "log": text, "log_truncated": truncated}


async def _named_change(call: Call) -> tuple[int, ChangeRec]:
    """The change a read names, with the log's failure count from before any wait: an answer
    built from what it holds waits for it to be durable (LogWriter.settled with that count)."""
    since = call.ctx.log.failures  # in the loop's step that checked the credential, before any wait
    rec = await find_change(call.repo_state(), call.params["change"])
    if rec is None:
        raise LoncaError("not_found", f"no change {call.params['change']}")
    return since, rec


@method("change.get", "read")
async def get(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    since, rec = await _named_change(call)
    # read on the loop: an integration (a check before the decision) replaces them
    attestations, before, redacted = list(rec.evidence), list(rec.review_evidence), frozenset(rs.redacted)
    out = change_json(rs, rec, *await claim_and_facts(call, rec))
    # the record was read after awaits (find_change's table read, the proposal's entry): an
    # entry applied meanwhile may be in it, shown only once it is durable
    await d.log.settled(since)
    out["evidence"], out["review_evidence"] = await on_store(
        call, lambda store: ([evidence_of(store, g, redacted) for g in _by_check(attestations)],
                             [evidence_of(store, g, redacted) for g in _by_check(before)]))
    return out


@method("change.resolve", "read")
async def resolve(call: Call) -> dict:
    rs = call.repo_state()
    prefix = call.params["prefix"]
    held = {c for c in rs.changes if c.startswith(prefix)} | rs.settled.held_ids(prefix)
    reader = rs.settled.reader
    found = sorted(held.union(await asyncio.to_thread(reader.ids, rs.name, prefix)) if reader else held)
    if not found:
        raise LoncaError("not_found", f"no change starts with {prefix}")
    if len(found) > 1:
        raise LoncaError("invalid", f"{len(found)} changes start with {prefix}: {', '.join(found[:5])}")
    return {"change": found[0]}


@method("change.diff", "read")
async def diff(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    since, rec = await _named_change(call)

    _claim, f = await claim_and_facts(call, rec)
    redacted = frozenset(rs.redacted)  # read on the loop: a redact may land while the diff is made
    await d.log.settled(since)  # the last read of the state was after awaits (change.get says why)

    def work(store: pygit2.Repository):  # rec's base, commit and facts never change once proposed
        patch = store.diff(store.get(rec.base).tree, store.get(rec.commit).tree, context_lines=3)
        files, text, size, truncated, hidden = [], [], 0, False, []
        for pt in patch:
            delta = pt.delta
            path = delta.new_file.path if delta.status != pygit2.GIT_DELTA_DELETED else delta.old_file.path
            if redacted and (str(delta.old_file.id) in redacted or str(delta.new_file.id) in redacted):
                hidden.append(path)  # seed: left out of files and diff, listed in redacted
                continue
            status = {pygit2.GIT_DELTA_ADDED: "added", pygit2.GIT_DELTA_DELETED: "deleted"}.get(delta.status, "modified")
            binary = delta.is_binary
            _ctx, added, removed = pt.line_stats
            syms = {k: [s for s in f.get(k, []) if split(s)[0] == path] for k in ("edits", "adds", "deletes", "signature_changes")}
            files.append({"path": path, "status": status, "added": None if binary else added,
                          "removed": None if binary else removed, "symbols": syms})
            if not truncated:
                chunk = pt.text or ""
                if size + len(chunk.encode()) > DIFF_CAP:
                    keep = []
                    for line in chunk.splitlines(keepends=True):
                        if size + len(line.encode()) > DIFF_CAP:
                            break
                        keep.append(line)
                        size += len(line.encode())
                    text.append("".join(keep))
                    truncated = True
                else:
                    text.append(chunk)
                    size += len(chunk.encode())
        return {"change": rec.id, "base": rec.base, "commit": rec.commit, "format": "unified", "files": files,
                "redacted": hidden, "diff": "".join(text), "truncated": truncated}
    return await on_store(call, work)
