"""Refusals the console makes itself, before the worker sees anything (a cross-site POST, a
missing CSRF token, a rate limit): the security page lists them next to the worker's own
security events. Kept in memory, the last few hundred."""
from collections import Counter, deque
from dataclasses import dataclass

from lonca.protocol import now_ms

KEPT = 500


@dataclass(frozen=True)
class ConsoleEvent:
    time_ms: int
    kind: str
    path: str
    client: str
    detail: str


class ConsoleEvents:
    def __init__(self):
        self.since_ms = now_ms()
        self._events: deque[ConsoleEvent] = deque(maxlen=KEPT)
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, path: str, client: str, detail: str) -> None:
        self._events.append(ConsoleEvent(now_ms(), kind, path, client, detail))
        self.counts[kind] += 1

    def recent(self) -> list[ConsoleEvent]:
        return list(reversed(self._events))
