"""Signed operations a human submits about who may sign and whether anything may change:
human.enroll (a second human, enrolled by one already there), freeze and unfreeze. Each is a
decide function for human.submit; this module adds them to its table when the worker loads it."""
from lonca.protocol import LoncaError

from .human_methods import SUBMIT_OPS, check_key
from .log import Draft, allow
from .methods import Call
from .state import RepoState

REASON_MAX = 4096


def decide_enroll(call: Call, rs: RepoState, op: dict) -> Draft:
    human = op["human"]
    if check_key(op["key"]) != op["key"]:
        raise LoncaError("invalid", 'op.key is exactly {"alg", "public"}')
    if human in rs.humans:
        raise LoncaError("invalid", f"{human} is enrolled in {rs.name} already; a new key is a human.rotate")
    if rs.profile == "hardened" and op["key"]["alg"] == "ed25519":
        raise LoncaError("invalid", "presence_required: the hardened profile enrols only keys that prove presence")
    return Draft(actor=call.auth.actor, op=op, decision=allow())


def _reason(op: dict) -> str:
    reason = op["reason"]
    if not reason.strip() or len(reason.encode()) > REASON_MAX:
        raise LoncaError("invalid", f"op.reason says why, in 1 to {REASON_MAX} bytes")
    return reason


def decide_freeze(call: Call, rs: RepoState, op: dict) -> Draft:
    _reason(op)
    if rs.frozen is not None:
        raise LoncaError("invalid", f"{rs.name} is frozen already ({rs.frozen})")
    return Draft(actor=call.auth.actor, op=op, decision=allow())


def decide_unfreeze(call: Call, rs: RepoState, op: dict) -> Draft:
    _reason(op)
    if rs.frozen is None:
        raise LoncaError("invalid", f"{rs.name} is not frozen")
    return Draft(actor=call.auth.actor, op=op, decision=allow())


SUBMIT_OPS.update({"human.enroll": decide_enroll, "freeze": decide_freeze, "unfreeze": decide_unfreeze})
