"""Enrolment requests: a human who registered a key on this console while repositories exist
waits here until an enrolled human signs a human.enroll for them. Kept in memory, shared by every
browser session; the fingerprint lets both humans check they speak of the same key."""
import secrets
from dataclasses import dataclass

from lonca.canonical import sha256_hex
from lonca.protocol import now_ms


KEPT = 100
LIFETIME_MS = 24 * 3600_000


@dataclass
class Request:
    id: str
    human: str
    key: dict
    created_ms: int

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)


def fingerprint(key: dict) -> str:
    h = sha256_hex(f"{key['alg']}:{key['public']}".encode())[:16]
    return " ".join(h[i:i + 4] for i in range(0, 16, 4))


class Enrolments:
    def __init__(self):
        self._requests: dict[str, Request] = {}

    def add(self, human: str, key: dict) -> Request:
        self._forget_old()
        for r in list(self._requests.values()):
            if r.human == human:
                del self._requests[r.id]  # the latest key of a name replaces an older request
        r = Request(id=secrets.token_urlsafe(12), human=human, key=key, created_ms=now_ms())
        self._requests[r.id] = r
        while len(self._requests) > KEPT:
            self._requests.pop(next(iter(self._requests)))
        return r

    def get(self, rid: str) -> Request | None:
        self._forget_old()
        return self._requests.get(rid)

    def all(self) -> list[Request]:
        self._forget_old()
        return sorted(self._requests.values(), key=lambda r: r.created_ms)

    def remove(self, rid: str) -> None:
        self._requests.pop(rid, None)

    def _forget_old(self) -> None:
        cutoff = now_ms() - LIFETIME_MS
        for rid in [r.id for r in self._requests.values() if r.created_ms < cutoff]:
            del self._requests[rid]
