"""Human signatures (seed 001, "human signature"): the signed intent bytes, signing with a file
key, and verification by key kind. Shared by the CLI (signing), the worker (verifying when an
operation arrives) and `lonca audit verify` (verifying again, offline)."""
import functools
import re
import secrets
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from lonca.canonical import canonical, sha256_hex
from lonca.protocol import NONCE_MAX, NONCE_MIN, SIGNATURE_LIFETIME_MS, SIGNATURE_SKEW_MS

INTENT_PURPOSE = "lonca-human-intent-v1"
LOGIN_PURPOSE = "lonca-human-login-v1"

# Edwards25519 (RFC 8032, 5.1): the field prime and the curve constant d.
_P = 2**255 - 19
_D = -121665 * pow(121666, -1, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def intent_bytes(repo: str, op: dict, nonce: str, issued_ms: int) -> bytes:
    return canonical({"purpose": INTENT_PURPOSE, "repo": repo, "op": op, "nonce": nonce,
                      "issued_ms": issued_ms})


def new_nonce(now_ms: int | None = None) -> tuple[str, int]:
    """(nonce, issued_ms) for a new signature: a random nonce, issued now unless told."""
    return secrets.token_hex(16), now_ms if now_ms is not None else int(time.time() * 1000)


def login_bytes(repo: str | None, human: str, ttl_ms: int, nonce: str, issued_ms: int) -> bytes:
    return canonical({"purpose": LOGIN_PURPOSE, "repo": repo, "human": human, "ttl_ms": ttl_ms,
                      "nonce": nonce, "issued_ms": issued_ms})


def fingerprint(key: dict) -> str:
    """Four groups of four hex digits that two people compare aloud to know they speak of the same
    key (the CLI prints it beside a new file key, the console beside what it enrols)."""
    h = sha256_hex(f"{key['alg']}:{key['public']}".encode())[:16]
    return " ".join(h[i:i + 4] for i in range(0, 16, 4))


FILE_KEY_RE = re.compile(r"^(?:ed25519:)?([0-9a-f]{64})$")


def file_key_from_text(text: str) -> dict | None:
    """A file key's public part as `lonca human key` prints it (`ed25519:<64 hex>`, or the hex
    alone), as a human key; None for anything else, or a point no signature verifies against."""
    m = FILE_KEY_RE.match(text.strip().lower())
    if m is None or ed25519_key_problem(bytes.fromhex(m.group(1))):
        return None
    return {"alg": "ed25519", "public": m.group(1)}


def sign_ed25519(private: Ed25519PrivateKey, message: bytes) -> str:
    return private.sign(message).hex()


class OpSigner:
    """What a human's key on this machine signs, whatever signs the bytes: a file key
    (humankeys.HumanKey) or a security key through ssh-keygen (security_key.SecurityKey)."""
    name: str

    def sign(self, message: bytes) -> str:
        """The `sig` field: hex of the signature over `message`."""
        raise NotImplementedError

    def _sig(self, message: bytes, nonce: str, issued_ms: int) -> dict:
        return {"human": self.name, "nonce": nonce, "issued_ms": issued_ms, "sig": self.sign(message)}

    def sign_op(self, repo: str, op: dict, now_ms: int | None = None) -> dict:
        nonce, issued = new_nonce(now_ms)
        return self._sig(intent_bytes(repo, op, nonce, issued), nonce, issued)

    def sign_login(self, repo: str | None, ttl_ms: int, now_ms: int | None = None) -> dict:
        nonce, issued = new_nonce(now_ms)
        return self._sig(login_bytes(repo, self.name, ttl_ms, nonce, issued), nonce, issued)


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


def _x_of(y: int, sign: int) -> int | None:
    """The x of the curve point with this y and sign bit (RFC 8032, 5.1.3), None if there is none."""
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    if v * x * x % _P == (-u) % _P:
        x = x * _SQRT_M1 % _P
    if v * x * x % _P != u:
        return None
    if x & 1 != sign:
        x = (_P - x) % _P
    return x


def _double(x: int, y: int) -> tuple[int, int]:
    """2·(x, y) by the complete addition law of the twisted Edwards curve (a = -1)."""
    t = _D * x * x * y * y % _P
    return 2 * x * y * pow(1 + t, -1, _P) % _P, (y * y + x * x) * pow(1 - t, -1, _P) % _P


@functools.lru_cache(maxsize=1024)  # a few hundred microseconds; the same keys verify again and again
def ed25519_key_problem(public: bytes) -> str | None:
    """Why these 32 bytes must not be an Ed25519 public key, or None. A key of small order
    (the eight points whose order divides 8: the all-zero key is one) "verifies" signatures its
    owner never made, e.g. the all-zero signature over any message; a non-canonical encoding or
    a point off the curve is no key at all. Checked where a human key enters (enrolment, the
    first key of a repository) and again on every verification."""
    if len(public) != 32:
        return "an ed25519 public key is 32 bytes"
    n = int.from_bytes(public, "little")
    sign, y = n >> 255, n & ((1 << 255) - 1)
    if y >= _P:
        return "the ed25519 public key is not canonically encoded (its y is not below 2^255 - 19)"
    x = _x_of(y, sign)
    if x is None:
        return "the ed25519 public key is not a point of the curve"
    if x == 0 and sign:
        return "the ed25519 public key is not canonically encoded (the sign of x = 0 is set)"
    for _ in range(3):
        x, y = _double(x, y)
    if (x, y) == (0, 1):
        return "the ed25519 public key has small order: it would accept signatures nobody made; use a real key"
    return None


def verify(key: dict, message: bytes, sig_hex: str) -> bool:
    """Whether sig_hex is key's signature over message. Unknown key kinds never verify."""
    alg = key.get("alg")
    if isinstance(alg, str) and alg.startswith("webauthn-"):
        # py_webauthn takes about 0.2 s to import: only a browser key's check pays for it, never
        # every CLI call that signs with a file key (issue 17)
        from lonca import webauthn
        return alg in webauthn.KEY_ALGS and webauthn.verify(key, message, sig_hex)
    if isinstance(alg, str) and alg.startswith("sk-"):
        from lonca import sshsig  # imports humansig (an sk-ed25519 key is checked like a file key)
        try:
            sshsig.check(key, message, sig_hex)
            return True
        except sshsig.Refused:
            return False
    try:
        sig = bytes.fromhex(sig_hex)
        if key.get("alg") == "ed25519":
            if ed25519_key_problem(bytes.fromhex(key["public"])):
                return False
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(key["public"])).verify(sig, message)
            return True
    except (ValueError, TypeError, KeyError, InvalidSignature):
        return False
    return False
