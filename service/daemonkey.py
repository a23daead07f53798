"""The daemon's Ed25519 signing key, made at first start, kept in $LONCA_HOME with mode 0600, and
the next one during a rotation."""
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.private_files import write_private
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


def _read(path: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise LoncaError("integrity", f"{path} is not an Ed25519 key")
    return key


class DaemonKeys:
    """The key the daemon signs with and, during a rotation, the next one (daemon.prepare_rotate
    makes it, `daemon.next.key` beside the key file). Each repository's entries are signed with
    the key its log is on (RepoState.daemon_key): a daemon.rotate moves one repository, and once
    none is left on the current key the next one takes its place (its file too)."""

    def __init__(self, path: Path, current: Ed25519PrivateKey):
        self.path = path
        self.next_path = path.with_name(path.stem + ".next" + path.suffix)
        self.current = current
        self.next: Ed25519PrivateKey | None = _read(self.next_path) if self.next_path.exists() else None
        self._publics: tuple = (None, None, None, None)     # (current, its public hex, next, its public hex)

    def _derived(self) -> tuple:
        """The public parts, derived once per key, not per ask (every log entry and every ping
        asks: deriving took 3 % of the loop's time under bench fleet's pings)."""
        if self._publics[0] is not self.current or self._publics[2] is not self.next:
            self._publics = (self.current, public_hex(self.current), self.next,
                             public_hex(self.next) if self.next is not None else None)
        return self._publics

    @property
    def public(self) -> str:
        return self._derived()[1]

    @property
    def next_public(self) -> str | None:
        return self._derived()[3]

    def holds(self, public: str) -> bool:
        return public in (self.public, self.next_public)

    def signer(self, public: str) -> Ed25519PrivateKey:
        """The held key whose public part is `public`."""
        publics = self._derived()
        key = self.current if public == publics[1] else self.next if public == publics[3] else None
        if key is None:
            raise LoncaError("foreign_key", f"this daemon does not hold the key {public[:16]}…; the repository waits "
                                            "for daemon.recover")
        return key

    def make_next(self) -> str:
        """The next key, made once per rotation."""
        if self.next is None:
            key = Ed25519PrivateKey.generate()
            write_private(self.next_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
            self.next = key
        return public_hex(self.next)

    def promote_if_done(self, on_current: int) -> None:
        """When no repository is left on the current key (`on_current`), the next one becomes it."""
        if self.next is not None and on_current == 0:
            os.replace(self.next_path, self.path)
            self.current, self.next = self.next, None
