"""Checking a human signature when it arrives: shape, key, freshness, and a nonce never used
before. Refusals carry the seed's reason code first in the message; nothing is logged."""
from lonca import humansig, sshsig
from lonca.protocol import LoncaError

from . import presence
from .state import State


def refuse(code: str, reason: str, message: str) -> LoncaError:
    return LoncaError(code, f"{reason}: {message}")


def nonce_used(state: State, nonce: str, now_ms: int) -> bool:
    until = state.nonces.get(nonce)
    return until is not None and until > now_ms


def check_fresh(state: State, sig: dict, now_ms: int, code: str) -> None:
    if humansig.freshness_problem(sig["issued_ms"], now_ms):
        raise refuse(code, "stale_human_signature", "the signature is older than ten minutes or from the future; sign again")
    if nonce_used(state, sig["nonce"], now_ms):
        raise refuse(code, "nonce_reused", "this nonce was used already; sign again with a new nonce")


def check_shape(sig, code: str) -> dict:
    problem = humansig.shape_problem(sig)
    if problem == "bad_nonce":
        raise refuse(code, "bad_nonce", "the nonce must be a string of 16 to 128 characters")
    if problem:
        raise refuse(code, "bad_human_signature", 'a human signature is {"human", "nonce", "issued_ms", "sig"}')
    return sig


def check_op(state: State, repo: str, op: dict, sig: dict, key: dict | None, now_ms: int, code: str = "denied") -> None:
    """The whole check of a signature over an operation; call it where the entry is decided."""
    check_shape(sig, code)
    if key is None:
        raise refuse("forbidden" if code == "denied" else code, "not_enrolled", f"{sig['human']} is not enrolled in {repo}")
    message = humansig.intent_bytes(repo, op, sig["nonce"], sig["issued_ms"])
    if presence.is_webauthn(key):
        rs = state.repo(repo)
        hardened = (rs.profile if rs else op.get("profile")) == "hardened"
        presence.check(key, message, sig["sig"], code, require_uv=hardened)
    elif presence.is_security_key(key):
        try:
            sshsig.check(key, message, sig["sig"])
        except sshsig.Refused as e:
            raise refuse(code, "bad_human_signature", str(e)) from None
    elif not humansig.verify(key, message, sig["sig"]):
        raise refuse(code, "bad_human_signature", "the signature does not verify with the enrolled key over this operation")
    check_fresh(state, sig, now_ms, code)
    presence.check_count(state.sign_counts, key, sig["sig"], code)
