"""Human signatures (seed 001, "human signature"): the signed intent bytes, signing with a file
key, and verification by key kind. Shared by the CLI (signing), the worker (verifying when an
operation arrives) and `lonca audit verify` (verifying again, offline)."""
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from lonca.canonical import canonical
from lonca.protocol import NONCE_MAX, NONCE_MIN, SIGNATURE_LIFETIME_MS, SIGNATURE_SKEW_MS

INTENT_PURPOSE = "lonca-human-intent-v1"
LOGIN_PURPOSE = "lonca-human-login-v1"


def intent_bytes(repo: str, op: dict, nonce: str, issued_ms: int) -> bytes:
    return canonical({"purpose": INTENT_PURPOSE, "repo": repo, "op": op, "nonce": nonce,
                      "issued_ms": issued_ms})


def login_bytes(repo: str | None, human: str, ttl_ms: int, nonce: str, issued_ms: int) -> bytes:
    return canonical({"purpose": LOGIN_PURPOSE, "repo": repo, "human": human, "ttl_ms": ttl_ms,
                      "nonce": nonce, "issued_ms": issued_ms})


def sign_ed25519(private: Ed25519PrivateKey, message: bytes) -> str:
    return private.sign(message).hex()


def shape_problem(sig) -> str | None:
    """The reason a human signature object is malformed, or None."""
    if not isinstance(sig, dict):
        return "bad_human_signature"
    if not isinstance(sig.get("human"), str) or not isinstance(sig.get("sig"), str):
        return "bad_human_signature"
    if not isinstance(sig.get("issued_ms"), int) or isinstance(sig.get("issued_ms"), bool):
        return "bad_human_signature"
    nonce = sig.get("nonce")
    if not isinstance(nonce, str) or not NONCE_MIN <= len(nonce) <= NONCE_MAX:
        return "bad_nonce"
    return None


def freshness_problem(issued_ms: int, now_ms: int) -> str | None:
    """A signature is good for ten minutes, with one minute of clock skew."""
    if issued_ms > now_ms + SIGNATURE_SKEW_MS or issued_ms < now_ms - SIGNATURE_LIFETIME_MS - SIGNATURE_SKEW_MS:
        return "stale_human_signature"
    return None


def verify(key: dict, message: bytes, sig_hex: str) -> bool:
    """Whether sig_hex is key's signature over message. Unknown key kinds never verify."""
    alg = key.get("alg")
    if isinstance(alg, str) and alg.startswith("webauthn-"):
        # py_webauthn takes about 0.2 s to import: only a browser key's check pays for it, never
        # every CLI call that signs with a file key (issue 17)
        from lonca import webauthn
        return alg in webauthn.KEY_ALGS and webauthn.verify(key, message, sig_hex)
    try:
        sig = bytes.fromhex(sig_hex)
        if key.get("alg") == "ed25519":
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(key["public"])).verify(sig, message)
            return True
    except (ValueError, TypeError, KeyError, InvalidSignature):
        return False
    return False
