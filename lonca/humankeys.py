"""A human's file key and session file on this machine (seed 001, "The human session file").

Keys live in $LONCA_HUMANS (else ~/.config/lonca/humans) as <name>.key (PEM, 0600); the session
as <name>.session, {"token", "expires_ms"}, 0600. A file that is a link, someone else's, or open
to group or others is not used. A name signs with one key on this machine: its file key, else its
FIDO security key (<name>.sk, lonca/security_key.py), so a recovery or rotation to a new file key
takes over from a security key left behind."""
import getpass
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca import humansig, paths, security_key
from lonca.private_files import private_file_ok, write_private


def default_human() -> str:
    return os.environ.get("LONCA_HUMAN") or getpass.getuser()


class HumanKey(humansig.OpSigner):
    def __init__(self, name: str, private: Ed25519PrivateKey):
        self.name = name
        self.private = private

    @property
    def public(self) -> dict:
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"alg": "ed25519", "public": raw.hex()}

    def sign(self, message: bytes) -> str:
        return humansig.sign_ed25519(self.private, message)


def key_path(name: str) -> Path:
    return paths.humans_dir() / f"{name}.key"


def session_path(name: str) -> Path:
    return paths.humans_dir() / f"{name}.session"


def recovery_key_path(name: str) -> Path:
    """Where `lonca human recovery-key` writes a recovery key: move it off this machine."""
    return paths.humans_dir() / f"{name}.recovery.key"


def load_key(name: str, path: Path | None = None) -> HumanKey | None:
    """`name`'s file key (or the key at `path` signing as `name`), if the file is safe to use."""
    path = path or key_path(name)
    if not private_file_ok(path):
        return None
    private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(private, Ed25519PrivateKey):
        return None
    return HumanKey(name, private)


Signer = HumanKey | security_key.SecurityKey


def load_signer(name: str) -> Signer | None:
    """The key `name` signs with here: the file key, else the security key."""
    return load_key(name) or security_key.load(name)


def create_key(name: str, path: Path | None = None) -> HumanKey:
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private(path or key_path(name), pem)
    return HumanKey(name, private)


def read_session(name: str, now_ms: int) -> str | None:
    """The session token, if the file is safe to use and the session has not expired."""
    path = session_path(name)
    if not private_file_ok(path):
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, OSError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str) or data.get("expires_ms", 0) <= now_ms:
        return None
    return data["token"]


def write_session(name: str, token: str, expires_ms: int) -> Path:
    path = session_path(name)
    write_private(path, json.dumps({"token": token, "expires_ms": expires_ms}).encode())
    return path
