"""The daemon's Ed25519 signing key, made at first start, kept in $LONCA_HOME with mode 0600."""
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.humankeys import write_private
from lonca.protocol import LoncaError


def load_or_create(path: Path, logged: dict[str, str]) -> Ed25519PrivateKey:
    """The key at `path`; a new one only when no log exists yet (`logged`: repo -> the daemon key
    its log is signed with). A key made over an existing log would sign entries that never
    verify, so a missing key with logs is refused, naming the key to restore."""
    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    if logged:
        keys = sorted(set(logged.values()))
        repos = ", ".join(sorted(logged))
        raise LoncaError("integrity", f"the daemon key {path} is missing, but the logs of {repos} are signed with daemon key "
                                      f"{' and '.join(keys)}; restore that key file from your backup to {path} (mode 0600) "
                                      "and start again. No new key was made: it could never sign those logs")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private(path, pem)
    return key


def public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
