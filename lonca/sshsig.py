"""FIDO security keys used from the CLI (seed 001, "human signature": sk-p256, sk-ed25519): the
`sig` is the hex of the SSHSIG blob `ssh-keygen -Y sign -n lonca` prints inside its armor
(OpenSSH PROTOCOL.sshsig), made by a security key (PROTOCOL.u2f). Shared by the worker and
`lonca audit verify`, so everything checked is in the blob and the enrolled key.

    blob   = "SSHSIG" uint32(1) string(publickey) string(namespace) string(reserved)
             string(hash_algorithm) string(signature)
    signed = "SSHSIG" string(namespace) string(reserved) string(hash_algorithm) string(H(message))
    the key signs SHA256(application) byte(flags) uint32(counter) SHA256(signed)
    (Ed25519 over those bytes, ECDSA P-256 over their SHA-256)

Only the exact form passes: the enrolled key with application ssh:lonca, namespace lonca, an
empty reserved field, sha512 or sha256, user presence in the flags, and no byte more anywhere."""
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from lonca import humansig

MAGIC = b"SSHSIG"
VERSION = 1
NAMESPACE = b"lonca"
APPLICATION = b"ssh:lonca"
HASHES = {b"sha512": hashlib.sha512, b"sha256": hashlib.sha256}
FLAG_USER_PRESENT = 0x01
# human key kind -> the OpenSSH key type of the security key
KEY_TYPES = {"sk-ed25519": b"sk-ssh-ed25519@openssh.com", "sk-p256": b"sk-ecdsa-sha2-nistp256@openssh.com"}
PUBLIC_HEX_LEN = {"sk-ed25519": 64, "sk-p256": 130}


class Refused(Exception):
    """A blob that is not a good signature; the message says what is wrong, for people."""


class _Reader:
    """RFC 4251 wire types, refusing a short read."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise Refused("the blob is truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def string(self) -> bytes:
        return self.take(self.u32())

    def end(self, what: str) -> None:
        if self.at != len(self.data):
            raise Refused(f"{what} has {len(self.data) - self.at} bytes more than its fields")


def string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def public_blob(key: dict) -> bytes:
    """The OpenSSH public key blob of an enrolled security key (application ssh:lonca)."""
    point = bytes.fromhex(key["public"])
    if key["alg"] == "sk-ed25519":
        return string(KEY_TYPES["sk-ed25519"]) + string(point) + string(APPLICATION)
    return string(KEY_TYPES["sk-p256"]) + string(b"nistp256") + string(point) + string(APPLICATION)


def key_problem(key: dict) -> str | None:
    """Why an sk- key's public part could never verify, or None (checked where keys enter)."""
    alg, public = key.get("alg"), key.get("public", "")
    if alg not in KEY_TYPES or not isinstance(public, str) or len(public) != PUBLIC_HEX_LEN[alg] \
            or not all(c in "0123456789abcdef" for c in public):
        return f"a {alg} key's public part is {PUBLIC_HEX_LEN.get(alg)} lowercase hex digits"
    point = bytes.fromhex(public)
    if alg == "sk-ed25519":
        return humansig.ed25519_key_problem(point)
    if point[0] != 4:
        return "an sk-p256 key is the 65-byte uncompressed SEC1 point (04 || x || y)"
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        return "the sk-p256 key is not a point of P-256"
    return None


def key_from_openssh(text: str) -> dict | None:
    """A security key's public line as OpenSSH writes it (id_ed25519_sk.pub or id_ecdsa_sk.pub of
    `ssh-keygen -t ed25519-sk -O application=ssh:lonca`), as a human key; None for anything else,
    a key of another application among them (its signatures could never verify here)."""
    import base64
    import binascii
    parts = text.split()
    kind = next((k for k, t in KEY_TYPES.items() if parts and parts[0].encode() == t), None)
    if kind is None or len(parts) < 2:
        return None
    try:
        r = _Reader(base64.b64decode(parts[1], validate=True))
        if r.string() != KEY_TYPES[kind] or (kind == "sk-p256" and r.string() != b"nistp256"):
            return None
        point = r.string()
        if r.string() != APPLICATION:
            return None
        r.end("the key")
    except (Refused, binascii.Error):
        return None
    key = {"alg": kind, "public": point.hex()}
    return None if key_problem(key) else key


@dataclass(frozen=True)
class Signed:
    flags: int
    counter: int


def check(key: dict, message: bytes, sig_hex: str) -> Signed:
    """Verify an SSHSIG blob over `message` with an enrolled security key; raises Refused."""
    if key.get("alg") not in KEY_TYPES or key_problem(key):
        raise Refused(f"the enrolled key cannot verify a security key's signature ({key.get('alg')})")
    try:
        blob = bytes.fromhex(sig_hex)
    except (ValueError, TypeError):
        raise Refused("the signature is not hex") from None
    r = _Reader(blob)
    if r.take(6) != MAGIC or r.u32() != VERSION:
        raise Refused("the blob is not an SSHSIG of version 1")
    if r.string() != public_blob(key):
        raise Refused("the blob names another key than the enrolled one (or an application other than ssh:lonca)")
    namespace, reserved, hash_alg, inner = r.string(), r.string(), r.string(), r.string()
    r.end("the blob")
    if namespace != NAMESPACE:
        raise Refused("the blob's namespace is not lonca (sign with ssh-keygen -Y sign -n lonca)")
    if reserved:
        raise Refused("the blob's reserved field is not empty")
    if hash_alg not in HASHES:
        raise Refused("the blob's hash algorithm is neither sha512 nor sha256")
    signed = MAGIC + string(namespace) + string(reserved) + string(hash_alg) + string(HASHES[hash_alg](message).digest())

    s = _Reader(inner)
    if s.string() != KEY_TYPES[key["alg"]]:
        raise Refused(f"the signature is not of type {KEY_TYPES[key['alg']].decode()}")
    raw, flags, counter = s.string(), s.u8(), s.u32()
    s.end("the signature")
    if not flags & FLAG_USER_PRESENT:
        raise Refused("the security key did not report user presence (touch the key)")
    data = (hashlib.sha256(APPLICATION).digest() + bytes([flags]) + struct.pack(">I", counter)
            + hashlib.sha256(signed).digest())
    point = bytes.fromhex(key["public"])
    try:
        if key["alg"] == "sk-ed25519":
            if len(raw) != 64:
                raise Refused("an Ed25519 signature is 64 bytes")
            Ed25519PublicKey.from_public_bytes(point).verify(raw, data)
        else:
            pair = _Reader(raw)
            r_, s_ = _mpint(pair), _mpint(pair)
            pair.end("the ECDSA signature")
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point).verify(
                encode_dss_signature(r_, s_), data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise Refused("the signature does not verify with the enrolled key over this operation") from None
    return Signed(flags, counter)


def _mpint(r: _Reader) -> int:
    """A positive mpint in its one encoding (RFC 4251: no needless leading zero)."""
    b = r.string()
    if not b or b[0] & 0x80 or (b[0] == 0 and (len(b) == 1 or not b[1] & 0x80)):
        raise Refused("the ECDSA signature's r or s is not a positive mpint")
    return int.from_bytes(b, "big")


def sign_count(sig_hex: str) -> int | None:
    """The security key's counter in a blob (read after check() passed), or None for a blob
    that is not an SSHSIG."""
    try:
        r = _Reader(bytes.fromhex(sig_hex))
        r.take(10)
        r.string()
        for _ in range(3):
            r.string()
        s = _Reader(r.string())
        s.string()
        s.string()
        s.u8()
        return s.u32()
    except (Refused, ValueError, TypeError):
        return None
