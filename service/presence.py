"""Presence-bound human signatures in the worker (DESIGN.md, "WebAuthn"): a refused assertion says
why, a hardened repository needs user verification, and an authenticator's sign count never goes
back. The counts come from the log at replay (every signed entry) and from logins while the worker
runs; logins are not logged, so after a restart the floor is the last logged assertion's count."""
from lonca import webauthn
from lonca.protocol import LoncaError


def is_webauthn(key: dict | None) -> bool:
    return bool(key) and key.get("alg") in webauthn.KEY_ALGS


def check(key: dict, message: bytes, sig_hex: str, code: str, *, require_uv: bool) -> None:
    try:
        webauthn.check(key, message, sig_hex, require_uv=require_uv)
    except webauthn.Refused as e:
        raise LoncaError(code, f"{e.reason}: {e.message}") from None


def check_count(sign_counts: dict[str, int], key: dict, sig_hex: str, code: str) -> None:
    """A count at or below the last one means a cloned authenticator or a replay (WebAuthn §6.1.1);
    an authenticator that keeps no count sends 0 every time and passes."""
    count = webauthn.sign_count(sig_hex)
    last = sign_counts.get(key["public"])
    if count is None or last is None or (count == 0 and last == 0):
        return
    if count <= last:
        raise LoncaError(code, f"bad_human_signature: the authenticator's sign count went back ({count} after {last}); "
                               "it may have been cloned: revoke this key and enrol a new one")


def record(sign_counts: dict[str, int], key: dict | None, sig_hex: str) -> None:
    count = webauthn.sign_count(sig_hex) if is_webauthn(key) else None
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
