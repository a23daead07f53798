"""A FIDO security key in software for tests (issue 14): builds SSHSIG blobs in OpenSSH's wire
format (PROTOCOL.sshsig, PROTOCOL.u2f) the way `ssh-keygen -Y sign -n lonca` does with a real
sk-ssh-ed25519 or sk-ecdsa-sha2-nistp256 key, written from the documents, not from lonca.sshsig.
Every field can be set wrong on purpose, to check the worker refuses each malformation.
(ssh-keygen cannot sign with an sk key without a FIDO device or a middleware library; no device
is faked here.)"""
import hashlib
import secrets
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from lonca import humansig
from lonca.protocol import now_ms


def ssh_string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def mpint(n: int) -> bytes:
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return ssh_string(b"\x00" + b if b[0] & 0x80 else b)


class SecurityKey:
    """kind: sk-ed25519 or sk-p256; the counter goes up by one per signature, like a real key's."""

    def __init__(self, name: str, kind: str = "sk-ed25519", application: bytes = b"ssh:lonca"):
        self.name, self.kind, self.application = name, kind, application
        self.counter = 0
        if kind == "sk-ed25519":
            self.private = Ed25519PrivateKey.generate()
            self.point = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.point = self.private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)

    @property
    def public(self) -> dict:
        return {"alg": self.kind, "public": self.point.hex()}

    @property
    def key_type(self) -> bytes:
        return b"sk-ssh-ed25519@openssh.com" if self.kind == "sk-ed25519" else b"sk-ecdsa-sha2-nistp256@openssh.com"

    def public_blob(self) -> bytes:
        if self.kind == "sk-ed25519":
            return ssh_string(self.key_type) + ssh_string(self.point) + ssh_string(self.application)
        return ssh_string(self.key_type) + ssh_string(b"nistp256") + ssh_string(self.point) + ssh_string(self.application)

    def blob(self, message: bytes, *, namespace: bytes = b"lonca", hash_alg: bytes = b"sha512",
             reserved: bytes = b"", magic: bytes = b"SSHSIG", version: int = 1, flags: int = 0x01,
             counter: int | None = None, signer: "SecurityKey | None" = None, digest_alg: bytes | None = None) -> bytes:
        """An SSHSIG blob over message. signer: another key signs while this one is named;
        digest_alg: the hash actually applied, when hash_alg is to lie about it."""
        if counter is None:
            self.counter += 1
            counter = self.counter
        h = hashlib.new((digest_alg or hash_alg).decode(), message).digest()
        signed = b"SSHSIG" + ssh_string(namespace) + ssh_string(reserved) + ssh_string(hash_alg) + ssh_string(h)
        data = (hashlib.sha256(self.application).digest() + bytes([flags]) + struct.pack(">I", counter)
                + hashlib.sha256(signed).digest())
        key = signer or self
        if key.kind == "sk-ed25519":
            raw = ssh_string(key.private.sign(data))
        else:
            r, s = decode_dss_signature(key.private.sign(data, ec.ECDSA(hashes.SHA256())))
            raw = ssh_string(mpint(r) + mpint(s))
        inner = ssh_string(self.key_type) + raw + bytes([flags]) + struct.pack(">I", counter)
        return (magic + struct.pack(">I", version) + ssh_string(self.public_blob()) + ssh_string(namespace)
                + ssh_string(reserved) + ssh_string(hash_alg) + ssh_string(inner))

    def sign_op(self, repo: str, op: dict, **how) -> dict:
        nonce, issued = secrets.token_hex(16), now_ms()
        message = humansig.intent_bytes(repo, op, nonce, issued)
        return {"human": self.name, "nonce": nonce, "issued_ms": issued, "sig": self.blob(message, **how).hex()}

    def sign_login(self, repo: str | None, ttl_ms: int) -> dict:
        nonce, issued = secrets.token_hex(16), now_ms()
        message = humansig.login_bytes(repo, self.name, ttl_ms, nonce, issued)
        return {"human": self.name, "nonce": nonce, "issued_ms": issued, "sig": self.blob(message).hex()}
