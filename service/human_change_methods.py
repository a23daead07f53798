"""A human's own change (seed 001, human.prepare_change; change.propose through human.submit): the
daemon builds the commit on base and computes its facts, exactly as for an agent's change.propose
(change_methods.prepare: one validator, facts from the tree written), and the human signs the
change.propose it answers. It needs no lease, goes through the same merge queue and checks, and
policy.cedar is asked on each path (human_methods.submit). The lease holders whose symbols it
changes are told (affected_lease, a symbols_changed event), as for a human's import.
docs/decisions.md, "A human's own change". This module adds its kind to human.submit's tables
when the worker loads it."""
from functools import partial

import pygit2

from lonca.canonical import content_hash
from lonca.protocol import LoncaError, claim_from_facts
from lonca.symbols import SYMBOLS_ENGINE, compare_claim

from .change_build import check_files, commit_exists, facts_json, facts_of, new_change_id
from .change_methods import STATUS, leases_on, prepare
from .human_methods import SUBMIT_AROUND, SUBMIT_OPS, Append, check_prepared
from .log import Draft, deny
from .methods import Call, method
from .read_methods import find_change, on_store
from .reducers import changed_symbols, touched_paths
from .state import RepoState
from .store import PreparedRow



def _own_change(rs: RepoState, human: str, change: str | None) -> None:
    """A new version names a change of this human that is still open (as an agent's names one
    of its workspace)."""
    if change is None:
        return
    old = rs.change(change)
    if old is None or old.actor != {"kind": "human", "name": human}:
        raise LoncaError("invalid", "change names no change of yours; send null for a new one")
    if old.status["status"] in ("queued", "integrated"):
        raise LoncaError("invalid", f"change {change} is {old.status['status']}; propose a new change")


@method("human.prepare_change", "human")
async def prepare_change(call: Call) -> dict:
    p = call.params
    d, rs = call.ctx, call.repo_state()
    files = check_files(p["files"])
    if not files:
        raise LoncaError("invalid", "a change changes at least one file")
    change, revert_of, intent = p.get("change"), p.get("revert_of"), p.get("intent") or ""
    if change is not None:
        await find_change(rs, change)   # a settled change's record in memory for _own_change
    _own_change(rs, call.auth.human, change)
    if revert_of is not None and await find_change(rs, revert_of) is None:
        raise LoncaError("invalid", f"revert_of names no change of {rs.name}")
    prepared = await prepare(call, rs, p["base"], files, intent or "lonca change", p["author"])
    if prepared is None:
        raise LoncaError("not_found", f"no commit {p['base']} in this repository")
    claim = {**claim_from_facts(prepared.facts, intent), "revert_of": revert_of}
    op = {"op": "change.propose", "change": change or new_change_id(), "commit": prepared.commit,
          "base": p["base"], "claim": claim}
    await d.db_write([PreparedRow(op_hash=content_hash(op), kind="change.propose", created_ms=d.now_ms())])
    return {"op": op, "facts": prepared.facts, "syntax_errors": prepared.syntax_errors}


async def submit_change(call: Call, rs: RepoState, op: dict, append: Append) -> dict:
    """The facts of base -> commit from the trees in the store (off the loop), then the decision."""
    d = call.ctx
    await check_prepared(call, op, "human.prepare_change")
    await find_change(rs, op["change"])     # a settled change's record in memory for the decision
    await rs.trunks.find(op["base"])        # and the base's place in trunk's history
    trunk, redacted = rs.trunk, frozenset(rs.redacted)  # read on the loop: the thread reads no live state

    def facts(store: pygit2.Repository) -> tuple[dict, list[str], list[str]]:
        """(facts, created_since_base paths, claim fields that differ from the facts)"""
        if not commit_exists(store, op["commit"]) or not commit_exists(store, op["base"]):
            raise LoncaError("invalid", "the op names a commit the store does not hold; prepare it again")
        base_map = d.tree_maps.get(store, op["base"])
        found = facts_of(store, d.symbols, op["base"], base_map, d.tree_maps.get(store, op["commit"]), redacted=redacted)
        out = facts_json(found)
        trunk_map = d.tree_maps.get(store, trunk)
        created = [p for p in out["added_files"] if p in trunk_map and p not in base_map]
        return out, created, [m["field"] for m in compare_claim(op["claim"], found)]
    got, created, mismatched = await on_store(call, facts)
    return await append(partial(decide_human_change, facts=got, created=created, mismatched=mismatched))


def decide_human_change(call: Call, rs: RepoState, op: dict, *, facts: dict, created: list[str],
                        mismatched: list[str]) -> Draft:
    """What an agent's proposal is decided on, less what is a session's (scope, leases,
    observation, the session's quota). Denied: frozen, unknown_base, stale_trunk,
    created_since_base, the day's quota, a claim that is not the facts'. Escalated, as any
    change: critical_path, unread_file. Told: the sessions holding a lease on what it changes or
    on what reads a signature it changes (affected_lease)."""
    d = call.ctx
    now = d.now_ms()
    me = call.auth.human
    old = rs.change(op["change"])
    if old is not None and old.commit == op["commit"]:
        raise LoncaError("invalid", f"change {op['change']} was proposed with this commit already "
                                    f"(seq {old.proposed_seq}); prepare the change again")
    _own_change(rs, me, op["change"] if old is not None else None)
    deny_r, esc_r, info_r = [], [], []
    if rs.frozen:
        deny_r.append(f"frozen:{rs.frozen}")
    deny_r += [f"claim_mismatch:{f}" for f in mismatched]
    at = rs.trunks.position(op["base"])
    if at is None:
        deny_r.append("unknown_base")
    elif rs.integrations - at > rs.policy.max_behind:
        deny_r.append("stale_trunk")
    deny_r += rs.quota_reasons(None, now)
    deny_r += [f"created_since_base:{p}" for p in created]
    paths = touched_paths(facts)
    esc_r += [f"critical_path:{p}" for p in paths if rs.policy.critical(p)]
    esc_r += [f"unread_file:{p}" for p in facts["unread_files"]]
    info_r += [f"signature_change:{s}" for s in facts["signature_changes"]]
    info_r += [f"affected_lease:{rs.sets[sid].session}:{sid}"
               for sid in sorted(leases_on(rs, changed_symbols(facts) + facts["adds"] + facts["affected"], None, now))]
    if deny_r:
        decision = deny(*deny_r, *esc_r, *info_r)
    else:
        decision = {"outcome": "escalate" if esc_r else "allow", "reasons": list(dict.fromkeys(esc_r + info_r))}
    def result(entry: dict) -> dict:  # the entry's outcome: policy.cedar may deny what this allowed
        return {"change": op["change"], "commit": op["commit"], "status": STATUS[entry["decision"]["outcome"]],
                "details": []}
    return Draft(actor=call.auth.actor, op=op, decision=decision, facts=facts, symbols_engine=SYMBOLS_ENGINE,
                 result=result,
                 after_commit=[d.queue_wake] if decision["outcome"] == "allow" else [])


SUBMIT_OPS["change.propose"] = decide_human_change
SUBMIT_AROUND["change.propose"] = submit_change
