"""What humans decide: approve (with checks), reject (with a reason) and comment on a pending change,
the priority of a queued one, and the policy (human.prepare_policy, then a signed policy.update)."""
import pygit2

from lonca.protocol import LoncaError

from .cedar_policy import CedarError, Unreadable, parse as parse_cedar
from . import gitstore
from .gitstore import DAEMON_SIG
from .log import Draft, allow, deny
from .methods import Call, method
from .policy import PolicyError, parse
from .read_methods import on_store
from .state import RepoState


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
    elif pending is not None:  # approvals count humans, not names (docs/decisions.md, "distinct humans")
        me = rs.principal(call.auth.human)
        reasons += [f"same_human:{a}" for a in pending.approvals if rs.principal(a) == me][:1]
    decision = deny(*reasons) if reasons else allow()

    def result(entry: dict) -> dict:
        return {"target_seq": op["target_seq"], "change": pending.change if pending else None}
    return Draft(actor=call.auth.actor, op=op, decision=decision, result=result,
                 after_commit=[call.ctx.queue_wake] if decision["outcome"] == "allow" else [])


def decide_priority(call: Call, rs: RepoState, op: dict) -> Draft:
    """A queued change goes ahead of the changes queued before it that it is independent of
    (lonca.queue.ahead), from the next round of the queue on."""
    rec = rs.change(op["change"])   # a settled one is read from its table here: a rare request
    if rec is None:
        raise LoncaError("not_found", f"no change {op['change']}")
    reasons = []
    if rec.status["status"] != "queued":
        reasons.append("not_queued")
    elif rec.priority_seq is not None:
        reasons.append("already_priority")
    decision = deny(*reasons) if reasons else allow()
    return Draft(actor=call.auth.actor, op=op, decision=decision, result=lambda e: {"change": rec.id},
                 after_commit=[call.ctx.queue_wake] if not reasons else [])


def decide_reject(call: Call, rs: RepoState, op: dict) -> Draft:
    if not 1 <= len(op["reason"].encode()) <= 4096:
        raise LoncaError("invalid", "reason is 1 to 4096 bytes: the requester reads it")
    pending = rs.pending.get(op["target_seq"])
    decision = deny("not_pending") if pending is None else allow()
    return Draft(actor=call.auth.actor, op=op, decision=decision,
                 result=lambda e: {"target_seq": op["target_seq"], "change": pending.change if pending else None})


def decide_comment(call: Call, rs: RepoState, op: dict) -> Draft:
    """A reviewer's comment on a file (a line of it, or a symbol) of a pending change's current
    version, perhaps asking for changes: the change stays pending, its agent is told (events and
    inbox, the kind comment) and answers with a new version. Not in the seed (docs/decisions.md)."""
    if not 1 <= len(op["text"].strip().encode()) <= 4096:
        raise LoncaError("invalid", "text is 1 to 4096 bytes: the agent reads it")
    pending = rs.pending.get(op["target_seq"])
    rec = rs.changes.get(pending.change) if pending and pending.change else None
    if pending is None:
        decision = deny("not_pending")
    elif rec is None:
        decision = deny("comment_not_a_change")
    elif op["path"] not in rec.paths:
        decision = deny(f"comment_path:{op['path'][:256]}")
    else:
        decision = allow()
    return Draft(actor=call.auth.actor, op=op, decision=decision,
                 result=lambda e: {"target_seq": op["target_seq"], "change": pending.change if pending else None})


@method("human.prepare_policy", "human")
async def prepare_policy(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    config, cedar = call.params["config"], call.params.get("policy")
    try:
        parse(config)
        if cedar is not None:
            parse_cedar(cedar)
    except (PolicyError, CedarError) as e:
        raise LoncaError("invalid", str(e)) from None
    parent = rs.policy_id  # read here: the thread reads no live state

    def write(store: pygit2.Repository) -> str:
        tb = store.TreeBuilder()
        tb.insert("lonca.toml", store.create_blob(config.encode()), pygit2.GIT_FILEMODE_BLOB)
        # no policy sent: policy.cedar stays as the policy in force has it, so a client that edits
        # lonca.toml alone never drops who may do what (docs/policy.md, "policy.cedar")
        kept = cedar if cedar is not None else gitstore.policy_text(store, parent, "policy.cedar")
        if kept is not None:
            tb.insert("policy.cedar", store.create_blob(kept.encode()), pygit2.GIT_FILEMODE_BLOB)
        sig = pygit2.Signature(call.auth.human, DAEMON_SIG[1], d.now_ms() // 1000, 0)
        return str(store.create_commit(None, sig, pygit2.Signature(*DAEMON_SIG, d.now_ms() // 1000, 0),
                                       "Lonca policy\n", tb.write(), [pygit2.Oid(hex=parent)]))
    commit = await on_store(call, write)
    return {"op": {"op": "policy.update", "policy": commit}}


def decide_policy_update(call: Call, rs: RepoState, op: dict) -> Draft:
    if set(op) != {"op", "policy"} or not isinstance(op["policy"], str):
        raise LoncaError("invalid", 'policy.update is {"op": "policy.update", "policy": id} from human.prepare_policy')
    text = call.ctx.policy_text(rs.name, op["policy"])
    if text is None:
        raise LoncaError("invalid", "the policy commit has no lonca.toml; use human.prepare_policy")
    # parsed once, here in the writer, and kept for the replay of this entry and every decision after it
    policy = call.ctx.state.policy_of(rs.name, op["policy"])
    if why := policy.problem or (policy.cedar.problem if isinstance(policy.cedar, Unreadable) else None):
        raise LoncaError("invalid", why)
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"policy": op["policy"]})
