"""Signed operations a human submits about who may sign and whether anything may change:
human.enroll (a second human, enrolled by one already there), the key lifecycle (human.rotate,
human.recovery_key, human.recover, human.revoke), freeze and unfreeze. Each is a decide function
for human.submit; this module adds them to its table when the worker loads it.

A key that is rotated, recovered or revoked ends every human session of that key, in every
repository (seed: "ends everywhere when the key is rotated, revoked or recovered"): the sessions'
rows are ended in the entry's transaction and in memory once it is durable.

The daemon's own key rotates the same way, one repository at a time: daemon.prepare_rotate makes
the next key, a signed daemon.rotate moves a repository's log to it (the entry itself is signed
with the old key, the next ones with the new), and once no repository is left on the old key the
next one replaces it (service/daemonkey.py). A restored repository whose log is on a key this
daemon does not hold (foreign) is adopted by a signed daemon.recover, the first entry signed with
this daemon's key."""
from typing import Callable

from lonca.protocol import LoncaError

from .human_methods import SUBMIT_OPS, check_key
from .log import Draft, allow
from .methods import Call, method
from .state import RepoState
from .store import TokenRow

REASON_MAX = 4096


def _new_key(rs: RepoState, op: dict) -> dict:
    key = op["key"]
    if check_key(key) != key:
        raise LoncaError("invalid", 'op.key is exactly {"alg", "public"}')
    if rs.profile == "hardened" and key["alg"] == "ed25519":
        raise LoncaError("invalid", "presence_required: the hardened profile enrols only keys that prove presence")
    if any(k == key for k in rs.humans.values()) or any(k == key for k in rs.recovery.values()):
        raise LoncaError("invalid", f"this key is enrolled in {rs.name} already (as a key or a recovery key); use a new one")
    return key


def _enrolled(rs: RepoState, human: str) -> dict:
    key = rs.humans.get(human)
    if key is None:
        raise LoncaError("invalid", f"{human} is not enrolled in {rs.name}")
    return key


def end_key_sessions(call: Call, key: dict) -> tuple[list[TokenRow], list[Callable[[], None]]]:
    """(rows to commit with the entry, effect after it) that end every human session of `key`."""
    tokens = call.ctx.tokens
    live = [r for r in tokens.rows.values()
            if r.kind == "human" and not r.ended and r.key_alg == key["alg"] and r.key_public == key["public"]]
    rows = [TokenRow(token_hash=r.token_hash, kind=r.kind, repo=r.repo, session=r.session, human=r.human,
                     key_alg=r.key_alg, key_public=r.key_public, expires_ms=r.expires_ms, ended=True) for r in live]

    def end() -> None:
        for r in live:
            r.ended = True
    return rows, [end]


def _key_change(call: Call, op: dict, old: dict, actor: dict) -> Draft:
    """The entry that moves a name off `old`, and ends that key's sessions with it."""
    rows, effects = end_key_sessions(call, old)
    return Draft(actor=actor, op=op, decision=allow(), rows=rows, after_commit=effects,
                 result=lambda e: {"human": op["human"], "sessions_ended": len(rows)})


def decide_enroll(call: Call, rs: RepoState, op: dict) -> Draft:
    human = op["human"]
    if human in rs.humans:
        raise LoncaError("invalid", f"{human} is enrolled in {rs.name} already; a new key is a human.rotate")
    _new_key(rs, op)
    return Draft(actor=call.auth.actor, op=op, decision=allow())


def decide_rotate(call: Call, rs: RepoState, op: dict) -> Draft:
    """A human moves their own name to a new key; the old key is refused from this entry on."""
    if op["human"] != call.auth.human:
        raise LoncaError("forbidden", f"a human rotates their own key; {call.auth.human} can not rotate {op['human']}'s "
                                      "(a lost key is recovered with its recovery key, a leaked one revoked)")
    old = _enrolled(rs, op["human"])
    _new_key(rs, op)
    return _key_change(call, op, old, call.auth.actor)


def decide_recovery_key(call: Call, rs: RepoState, op: dict) -> Draft:
    """The key that may sign a human.recover of this name, kept offline; one at a time."""
    if op["human"] != call.auth.human:
        raise LoncaError("forbidden", f"a human sets their own recovery key; {call.auth.human} can not set {op['human']}'s")
    _enrolled(rs, op["human"])
    _new_key(rs, op)
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"human": op["human"]})


def decide_recover(call: Call, rs: RepoState, op: dict) -> Draft:
    """Signed by the recovery key (checked by human.submit): the name moves to a new key with no
    session, and the recovery key is spent."""
    old = _enrolled(rs, op["human"])
    _new_key(rs, op)
    return _key_change(call, op, old, {"kind": "human", "name": op["human"]})


def decide_revoke(call: Call, rs: RepoState, op: dict) -> Draft:
    """Any human of the repository cuts a name off (a leaked or cloned key), their own included,
    but not the last one: nobody could sign there again (rotate or recover that key instead)."""
    check_reason(op)
    old = _enrolled(rs, op["human"])
    if len(rs.humans) == 1:
        raise LoncaError("invalid", f"{op['human']} is the only human of {rs.name}: revoking them leaves nobody to sign; "
                                    "rotate the key (human.rotate) or recover it with the recovery key")
    return _key_change(call, op, old, call.auth.actor)


def check_reason(op: dict) -> str:
    reason = op["reason"]
    if not reason.strip() or len(reason.encode()) > REASON_MAX:
        raise LoncaError("invalid", f"op.reason says why, in 1 to {REASON_MAX} bytes")
    return reason


def decide_freeze(call: Call, rs: RepoState, op: dict) -> Draft:
    check_reason(op)
    if rs.frozen is not None:
        raise LoncaError("invalid", f"{rs.name} is frozen already ({rs.frozen})")
    return Draft(actor=call.auth.actor, op=op, decision=allow())


def decide_unfreeze(call: Call, rs: RepoState, op: dict) -> Draft:
    check_reason(op)
    if rs.frozen is None:
        raise LoncaError("invalid", f"{rs.name} is not frozen")
    return Draft(actor=call.auth.actor, op=op, decision=allow())


@method("daemon.prepare_rotate", "any human")
async def prepare_rotate(call: Call) -> dict:
    d = call.ctx
    key = d.keys.make_next()  # one small file, once per rotation
    mine = d.state.human_repos(call.auth.human, call.auth.key)
    return {"key": key, "repos": [r for r in mine if d.state.repos[r].daemon_key == d.keys.public]}


def decide_daemon_rotate(call: Call, rs: RepoState, op: dict) -> Draft:
    d = call.ctx
    if op["key"] == rs.daemon_key:
        raise LoncaError("invalid", f"{rs.name} is on the key {op['key'][:16]}… already")
    if op["key"] != d.keys.next_public:
        raise LoncaError("invalid", "a rotation to a key the daemon does not hold: call daemon.prepare_rotate and sign "
                                    "the key it answers")

    def promote() -> None:
        d.keys.promote_if_done(sum(1 for r in d.state.repos.values() if r.daemon_key == d.keys.public))
    return Draft(actor=call.auth.actor, op=op, decision=allow(), after_commit=[promote],
                 result=lambda e: {"daemon_key": op["key"]})


def decide_daemon_recover(call: Call, rs: RepoState, op: dict) -> Draft:
    """A foreign repository (restored from a log on another daemon's key) moves to this daemon's
    key. Its humans vouch for the move: one signs it with their key and a session, or, with
    `recover`, with their recovery key and no session, which also moves their name to a new key
    (a machine lost with the human's key on it)."""
    d = call.ctx
    if d.keys.holds(rs.daemon_key):
        raise LoncaError("invalid", f"{rs.name}'s log is on a key this daemon holds: nothing to recover "
                                    "(a new daemon key is daemon.prepare_rotate and daemon.rotate)")
    if op["key"] != d.keys.public:
        raise LoncaError("invalid", "a recovery to a key the daemon does not hold: sign this daemon's key "
                                    f"({d.keys.public[:16]}…, ping.daemon_key)")
    recover = op.get("recover")
    if recover is None:
        return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"daemon_key": op["key"]})
    old = _enrolled(rs, recover["human"])
    _new_key(rs, recover)
    rows, effects = end_key_sessions(call, old)
    return Draft(actor={"kind": "human", "name": recover["human"]}, op=op, decision=allow(), rows=rows,
                 after_commit=effects, result=lambda e: {"daemon_key": op["key"], "human": recover["human"],
                                                         "sessions_ended": len(rows)})


SUBMIT_OPS.update({"daemon.rotate": decide_daemon_rotate, "daemon.recover": decide_daemon_recover,
                   "human.enroll": decide_enroll, "human.rotate": decide_rotate,
                   "human.recovery_key": decide_recovery_key, "human.recover": decide_recover,
                   "human.revoke": decide_revoke, "freeze": decide_freeze, "unfreeze": decide_unfreeze})
