"""WebAuthn credentials as human keys (DESIGN.md, "WebAuthn"), shared by the console (enrolment),
the worker (checking an assertion when it arrives) and `lonca audit verify` (checking it again).

A key of kind webauthn-ed25519, webauthn-es256 or webauthn-rs256 keeps the seed's shape {"alg", "public": hex}:
`public` is the hex of the canonical JSON {"cose": base64url COSE key, "credential_id": base64url,
"rp_id", "origin"}. Everything an assertion is checked against is in the enrolled key, so the log
alone verifies it, and keys still compare by (alg, public) everywhere. The challenge of an assertion is SHA-256 of the
canonical intent (or login) bytes; its `sig` is the hex of the canonical JSON
{"a": authenticatorData, "c": clientDataJSON, "s": signature}, base64url as the browser sent them."""
import hashlib
import json
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature

from lonca import humansig
from lonca.canonical import canonical
from lonca.protocol import LoncaError

# py_webauthn takes about 0.25 s to import: the functions that parse or verify import it, so
# what only names the algorithms (the worker's start, replaying a log without WebAuthn keys) does not.
# COSE algorithm ids: EdDSA, ES256 (RFC 9053), RS256 = RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8812), which
# Windows Hello and some older security keys offer alone
KEY_ALGS = {"webauthn-ed25519": -8, "webauthn-es256": -7, "webauthn-rs256": -257}
RSA_MIN_BITS = 2048  # what RFC 8812 requires of an RS256 key; shorter ones are refused at enrolment
B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*$")
ORIGIN_RE = re.compile(r"^https?://[^/\s?#]+$")
RP_ID_RE = re.compile(r"^[a-z0-9.-]{1,253}$")


class Refused(Exception):
    """An assertion that does not verify: a seed reason code and what is wrong, for people."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def challenge(message: bytes) -> bytes:
    return hashlib.sha256(message).digest()


def encode_sig(authenticator_data: str, client_data_json: str, signature: str) -> str:
    """The human signature's `sig` for an assertion, from the base64url fields of
    `credential.toJSON().response`."""
    return canonical({"a": authenticator_data, "c": client_data_json, "s": signature}).hex()


def _parts(sig_hex: str) -> tuple[bytes, bytes, bytes]:
    try:
        obj = json.loads(bytes.fromhex(sig_hex))
        fields = [obj[k] for k in ("a", "c", "s")]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise Refused("bad_human_signature", "the signature is not a WebAuthn assertion {a, c, s}") from None
    from webauthn.helpers import base64url_to_bytes
    if set(obj) != {"a", "c", "s"} or not all(isinstance(f, str) and B64URL_RE.match(f) for f in fields):
        raise Refused("bad_human_signature", "the assertion's fields must be base64url strings a, c and s")
    return tuple(base64url_to_bytes(f) for f in fields)


def sign_count(sig_hex: str) -> int | None:
    """The authenticator's sign count in an assertion, or None for a signature that is not one."""
    from webauthn.helpers import parse_authenticator_data
    try:
        return parse_authenticator_data(_parts(sig_hex)[0]).sign_count
    except Exception:
        return None


def check(key: dict, message: bytes, sig_hex: str, *, require_uv: bool = False) -> None:
    """Check an assertion over `message` with an enrolled key; raises Refused saying why not."""
    from webauthn.helpers import (decode_credential_public_key, decoded_public_key_to_cryptography,
                                  parse_authenticator_data, parse_client_data_json, verify_signature)
    from webauthn.helpers.cose import COSEAlgorithmIdentifier
    try:
        cred = credential(key)
    except LoncaError as e:
        raise Refused("bad_human_signature", e.message) from None
    auth_data_bytes, client_data_bytes, signature = _parts(sig_hex)
    try:
        client_data = parse_client_data_json(client_data_bytes)
        auth_data = parse_authenticator_data(auth_data_bytes)
    except Exception:
        raise Refused("bad_human_signature", "the assertion's client data or authenticator data is malformed") from None
    if client_data.type != "webauthn.get":
        raise Refused("bad_human_signature", f"the client data is of type {client_data.type!r}, not webauthn.get")
    if client_data.challenge != challenge(message):
        raise Refused("bad_human_signature", "the assertion was made over another operation (its challenge is not this one's)")
    if client_data.origin != cred.origin:
        raise Refused("bad_human_signature", f"the assertion comes from {client_data.origin}, not the enrolled origin {cred.origin}")
    if client_data.cross_origin:
        raise Refused("bad_human_signature", "the assertion was made in a cross-origin frame")
    if auth_data.rp_id_hash != hashlib.sha256(cred.rp_id.encode()).digest():
        raise Refused("bad_human_signature", f"the assertion is not for the relying party {cred.rp_id}")
    if not auth_data.flags.up:
        raise Refused("presence_required", "the authenticator did not report user presence (touch the key)")
    if require_uv and not auth_data.flags.uv:
        raise Refused("presence_required", "this repository's profile is hardened: the authenticator must verify the user (PIN or biometrics)")
    try:
        public = decoded_public_key_to_cryptography(decode_credential_public_key(cred.cose))
        verify_signature(public_key=public, signature_alg=COSEAlgorithmIdentifier(KEY_ALGS[key["alg"]]), signature=signature,
                         data=auth_data_bytes + hashlib.sha256(client_data_bytes).digest())
    except (InvalidSignature, ValueError, KeyError, TypeError):
        raise Refused("bad_human_signature", "the assertion's signature does not verify with the enrolled credential") from None


def verify(key: dict, message: bytes, sig_hex: str) -> bool:
    try:
        check(key, message, sig_hex)
        return True
    except Refused:
        return False


@dataclass(frozen=True)
class Credential:
    cose: bytes
    credential_id: str
    rp_id: str
    origin: str


def make_key(alg: str, cose: bytes, credential_id: str, rp_id: str, origin: str) -> dict:
    from webauthn.helpers import bytes_to_base64url
    public = canonical({"cose": bytes_to_base64url(cose), "credential_id": credential_id, "rp_id": rp_id, "origin": origin})
    return {"alg": alg, "public": public.hex()}


def credential(key: dict) -> Credential:
    """What an enrolled key names; LoncaError(invalid) for one that could never verify."""
    from webauthn.helpers import base64url_to_bytes, decode_credential_public_key, decoded_public_key_to_cryptography
    from webauthn.helpers.cose import COSECRV
    try:
        obj = json.loads(bytes.fromhex(key["public"]))
        cred = Credential(base64url_to_bytes(obj["cose"]), obj["credential_id"], obj["rp_id"], obj["origin"])
        decoded = decode_credential_public_key(cred.cose)
        decoded_public_key_to_cryptography(decoded)
    except Exception:
        raise LoncaError("invalid", "a WebAuthn key's public part is the hex of {cose, credential_id, rp_id, origin}") from None
    if set(obj) != {"cose", "credential_id", "rp_id", "origin"} or not all(isinstance(v, str) for v in obj.values()):
        raise LoncaError("invalid", "a WebAuthn key's public part is the hex of {cose, credential_id, rp_id, origin}")
    if not ORIGIN_RE.match(cred.origin) or not RP_ID_RE.match(cred.rp_id) or not cred.credential_id or not B64URL_RE.match(cred.credential_id):
        raise LoncaError("invalid", "a WebAuthn key's origin is scheme://host[:port], rp_id a host name, credential_id base64url")
    if decoded.alg != KEY_ALGS.get(key.get("alg")) or (key["alg"] == "webauthn-es256" and decoded.crv != COSECRV.P256):
        raise LoncaError("invalid", f"the COSE key is not a {key.get('alg')} key")
    if key["alg"] == "webauthn-ed25519" and (why := humansig.ed25519_key_problem(decoded.x)):
        raise LoncaError("invalid", why)
    if key["alg"] == "webauthn-rs256" and (why := _rsa_key_problem(decoded.n, decoded.e)):
        raise LoncaError("invalid", why)
    return cred


def _rsa_key_problem(n: bytes, e: bytes) -> str | None:
    modulus, exponent = int.from_bytes(n, "big"), int.from_bytes(e, "big")
    if modulus.bit_length() < RSA_MIN_BITS:
        return f"the RS256 key's modulus has {modulus.bit_length()} bits; at least {RSA_MIN_BITS} are needed"
    if exponent < 3 or exponent % 2 == 0:
        return "the RS256 key's public exponent must be odd and at least 3"
    return None


def key_from_registration(credential_json: str, expected_challenge: bytes, rp_id: str, origin: str,
                          require_uv: bool) -> dict:
    """Verify a registration (`credential.toJSON()` as a string) and return the human key."""
    from webauthn import verify_registration_response
    from webauthn.helpers import bytes_to_base64url, decode_credential_public_key
    verified = verify_registration_response(
        credential=credential_json, expected_challenge=expected_challenge, expected_rp_id=rp_id,
        expected_origin=origin, require_user_verification=require_uv,
        supported_pub_key_algs=list(KEY_ALGS.values()))
    alg = decode_credential_public_key(verified.credential_public_key).alg
    kind = next(k for k, v in KEY_ALGS.items() if v == alg)
    key = make_key(kind, verified.credential_public_key, bytes_to_base64url(verified.credential_id), rp_id, origin)
    credential(key)
    return key
