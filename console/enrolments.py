"""Enrolment requests: a human who registered a key on this console while repositories exist
waits here until an enrolled human signs a human.enroll for them, or declines the request. Kept
in memory, shared by every browser session; the fingerprint lets both humans check they speak of
the same key. A request never replaces or hides another: two requests for one name both show,
and the enrolled human tells them apart by fingerprint. The number waiting is bounded; when it
is full a new request is refused rather than an old one dropped, so a flood cannot push out a
real request (the console also rate-limits requests, see actions.register_finish)."""
import secrets
from dataclasses import dataclass

from lonca.humansig import fingerprint
from lonca.protocol import now_ms

KEPT = 100
PER_NAME = 3
LIFETIME_MS = 24 * 3600_000


class Refused(Exception):
    """A request the console will not hold; the message says what to do."""


@dataclass
class Request:
    id: str
    human: str
    key: dict
    created_ms: int
    client: str  # the address it came from, so the human who declines sees a flood's source

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)


class Enrolments:
    def __init__(self):
        self._requests: dict[str, Request] = {}

    def waiting(self, human: str, key: dict) -> Request | None:
        """The request already waiting for this human and key (a retry is that request)."""
        self._forget_old()
        return next((r for r in self._requests.values() if r.human == human and r.key == key), None)

    def add(self, human: str, key: dict, client: str) -> Request:
        same_key = self.waiting(human, key)
        if same_key is not None:
            return same_key
        same = [r for r in self._requests.values() if r.human == human]
        if len(same) >= PER_NAME:
            raise Refused(f"{len(same)} enrolment requests for {human} wait already; an enrolled human "
                          "declines the wrong ones on Repositories, then register again")
        if len(self._requests) >= KEPT:
            raise Refused(f"{KEPT} enrolment requests wait already; an enrolled human declines some on "
                          "Repositories, then register again")
        r = Request(id=secrets.token_urlsafe(12), human=human, key=key, created_ms=now_ms(), client=client)
        self._requests[r.id] = r
        return r

    def get(self, rid: str) -> Request | None:
        self._forget_old()
        return self._requests.get(rid)

    def all(self) -> list[Request]:
        self._forget_old()
        return sorted(self._requests.values(), key=lambda r: r.created_ms)

    def namesakes(self) -> dict[str, int]:
        """How many requests wait for each name (more than one: compare fingerprints)."""
        counts: dict[str, int] = {}
        for r in self.all():
            counts[r.human] = counts.get(r.human, 0) + 1
        return counts

    def remove(self, rid: str) -> Request | None:
        return self._requests.pop(rid, None)

    def _forget_old(self) -> None:
        cutoff = now_ms() - LIFETIME_MS
        for rid in [r.id for r in self._requests.values() if r.created_ms < cutoff]:
            del self._requests[rid]
