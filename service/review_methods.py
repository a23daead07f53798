"""What humans decide: approve (with checks) and reject (with a reason) of a pending change,
and the policy (human.prepare_policy, then a signed policy.update)."""
import asyncio

import pygit2

from lonca.protocol import LoncaError

from .change_methods import leave_queue
from .gitstore import DAEMON_SIG
from .log import Draft, allow, deny
from .methods import Call, method
from .policy import PolicyError, parse
from .state import RepoState, State, register



def decide_approve(call: Call, rs: RepoState, op: dict) -> Draft:
    reasons = []
    pending = rs.pending.get(op["target_seq"])
    checks = op.get("checks")
    if pending is None:
        reasons.append("not_pending")
    if checks is not None:
        if pending is not None and pending.change is None:
            reasons.append("checks_not_a_change")
        elif not isinstance(checks, list) or not checks or len(checks) > 32 or not all(isinstance(c, str) for c in checks) \
                or checks != sorted(set(checks)):
            reasons.append("invalid_checks")
        else:
            reasons += [f"unknown_check:{c}" for c in checks if c not in rs.policy.checks]
    if pending is not None and call.auth.human in pending.approvals:
        reasons.append("already_approved")
    decision = deny(*reasons) if reasons else allow()

    def result(entry: dict) -> dict:
        if decision["outcome"] == "allow":
            call.daemon.queue_wake()
        return {"target_seq": op["target_seq"], "change": pending.change if pending else None}
    return Draft(actor=call.auth.actor, op=op, decision=decision, result=result)


@register("approve")
def _apply_approve(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    pending = rs.pending.get(op["target_seq"])
    if outcome != "allow" or pending is None:
        return
    pending.approvals.append(entry["actor"]["name"])
    rec = rs.changes.get(pending.change) if pending.change else None
    if rec and op.get("checks"):
        rec.checks = sorted(set(rec.checks) | set(op["checks"]))
    if len(pending.approvals) < rs.policy.approvals_required:
        return
    del rs.pending[op["target_seq"]]
    if rec:
        rec.status = {"status": "queued"}
        rec.provenance = "reviewed"
        rs.queue.append(rec.id)
        rs.event({"kind": "approved", "seq": entry["seq"], "target_seq": op["target_seq"], "change": rec.id}, rec.session or "")


def decide_reject(call: Call, rs: RepoState, op: dict) -> Draft:
    if not 1 <= len(op["reason"].encode()) <= 4096:
        raise LoncaError("invalid", "reason is 1 to 4096 bytes: the requester reads it")
    pending = rs.pending.get(op["target_seq"])
    decision = deny("not_pending") if pending is None else allow()
    return Draft(actor=call.auth.actor, op=op, decision=decision,
                 result=lambda e: {"target_seq": op["target_seq"], "change": pending.change if pending else None})


@register("reject")
def _apply_reject(st: State, rs: RepoState, entry: dict, op: dict, outcome: str) -> None:
    pending = rs.pending.pop(op["target_seq"], None)
    if outcome != "allow" or pending is None:
        return
    if pending.change and pending.change in rs.changes:
        rec = rs.changes[pending.change]
        leave_queue(rs, rec.id, {"status": "rejected", "reasons": [f"rejected: {op['reason']}"]})
        rs.event({"kind": "rejected", "seq": entry["seq"], "target_seq": op["target_seq"], "reason": op["reason"],
                  "change": rec.id}, rec.session or "")


@method("human.prepare_policy", "human")
async def prepare_policy(call: Call) -> dict:
    d, rs = call.daemon, call.repo_state()
    config, cedar = call.params["config"], call.params.get("policy")
    try:
        parse(config)
    except PolicyError as e:
        raise LoncaError("invalid", str(e)) from None
    store = d.store(rs.name)

    def write() -> str:
        tb = store.TreeBuilder()
        tb.insert("lonca.toml", store.create_blob(config.encode()), pygit2.GIT_FILEMODE_BLOB)
        if cedar is not None:
            tb.insert("policy.cedar", store.create_blob(cedar.encode()), pygit2.GIT_FILEMODE_BLOB)
        sig = pygit2.Signature(call.auth.human, DAEMON_SIG[1], d.now_ms() // 1000, 0)
        return str(store.create_commit(None, sig, pygit2.Signature(*DAEMON_SIG, d.now_ms() // 1000, 0),
                                       "Lonca policy\n", tb.write(), [pygit2.Oid(hex=rs.policy_id)]))
    commit = await asyncio.to_thread(write)
    return {"op": {"op": "policy.update", "policy": commit}}


def decide_policy_update(call: Call, rs: RepoState, op: dict) -> Draft:
    if set(op) != {"op", "policy"} or not isinstance(op["policy"], str):
        raise LoncaError("invalid", 'policy.update is {"op": "policy.update", "policy": id} from human.prepare_policy')
    text = call.daemon.policy_text(rs.name, op["policy"])
    if text is None:
        raise LoncaError("invalid", "the policy commit has no lonca.toml; use human.prepare_policy")
    try:
        parse(text)
    except PolicyError as e:
        raise LoncaError("invalid", str(e)) from None
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"policy": op["policy"]})
