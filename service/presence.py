"""Presence-bound human signatures in the worker (DESIGN.md, "WebAuthn"): a refused assertion says
why, a hardened repository needs user verification, and an authenticator's sign count never goes
back. The counts come from the log at replay (every signed entry) and from logins while the worker
runs; logins are not logged, so after a restart the floor is the last logged assertion's count."""
from typing import TYPE_CHECKING

from lonca import sshsig, webauthn
from lonca.protocol import LoncaError

if TYPE_CHECKING:
    from .state import RepoState


def is_webauthn(key: dict | None) -> bool:
    return bool(key) and key.get("alg") in webauthn.KEY_ALGS


def is_security_key(key: dict | None) -> bool:
    return bool(key) and key.get("alg") in sshsig.KEY_TYPES


def sign_count(key: dict | None, sig_hex: str) -> int | None:
    """The authenticator's counter in a signature already verified, for a key that keeps one."""
    if is_webauthn(key):
        return webauthn.sign_count(sig_hex)
    if is_security_key(key):
        return sshsig.sign_count(sig_hex)
    return None


def proves_presence(key: dict) -> bool:
    """Every kind of human key but a file key needs a touch (or Touch ID) for each signature."""
    return key["alg"] != "ed25519"


def below_hardened(rs: "RepoState") -> list[str]:
    """status.below_hardened on a hardened daemon (seed 001): what leaves this repository below
    the hardened profile. profile:cooperative (a file key may approve, a passkey need not verify
    its user), then file_key:<human> for each human whose key proves no presence (a hardened
    repository made without_presence, until that human moves to a passkey or security key)."""
    out = [] if rs.profile == "hardened" else ["profile:cooperative"]
    return out + [f"file_key:{name}" for name, key in sorted(rs.humans.items()) if not proves_presence(key)]


def required(rs: "RepoState", signer_key: dict, op: dict) -> str | None:
    """Why this signed write needs a key that proves presence and the signer's does not, or None.
    [review] presence_required, always on a hardened repository (docs/decisions.md, "An agent
    must not approve its own change"). While no human of the repository holds such a key (a
    hardened one made with without_presence), a file key may still enrol or rotate to one,
    or nothing could ever be written there again."""
    if proves_presence(signer_key) or not (rs.policy.presence_required or rs.profile == "hardened"):
        return None
    if op["op"] in ("human.enroll", "human.rotate") and proves_presence(op["key"]) \
            and not any(proves_presence(k) for k in rs.humans.values()):
        return None
    why = "the hardened profile" if rs.profile == "hardened" else "the policy ([review] presence_required)"
    return (f"presence_required: {why} needs a key that proves presence (a passkey or security key) for "
            f"{op['op']} in {rs.name}; sign it in the console or with a security key (lonca human key --security-key), "
            "a file key only logs in, reads and prepares")


def check(key: dict, message: bytes, sig_hex: str, code: str, *, require_uv: bool) -> None:
    try:
        webauthn.check(key, message, sig_hex, require_uv=require_uv)
    except webauthn.Refused as e:
        raise LoncaError(code, f"{e.reason}: {e.message}") from None


CLONED = "the authenticator's sign count went back"  # security.events tells it apart (cloned_authenticator)


def check_count(sign_counts: dict[str, int], key: dict, sig_hex: str, code: str) -> None:
    """A count at or below the last one means a cloned authenticator or a replay (WebAuthn §6.1.1);
    an authenticator that keeps no count sends 0 every time and passes. A security key's SSHSIG
    counter (PROTOCOL.u2f) is held to the same rule."""
    count = sign_count(key, sig_hex)
    last = sign_counts.get(key["public"])
    if count is None or last is None or (count == 0 and last == 0):
        return
    if count <= last:
        raise LoncaError(code, f"bad_human_signature: {CLONED} ({count} after {last}); "
                               "it may have been cloned: revoke this key and enrol a new one")


def record(sign_counts: dict[str, int], key: dict | None, sig_hex: str) -> None:
    count = sign_count(key, sig_hex)
    if count is not None:
        sign_counts[key["public"]] = max(count, sign_counts.get(key["public"], 0))


def login_refusal(keys: list[dict], message: bytes, sig_hex: str) -> str | None:
    """Why a login's assertion was refused by the WebAuthn keys it could be for, or None."""
    for key in keys:
        if is_webauthn(key):
            try:
                webauthn.check(key, message, sig_hex)
            except webauthn.Refused as e:
                return f"{e.reason}: {e.message}"
    return None
