"""What the merge queue verifies now, for a human watching it (docs/decisions.md, "queue.running"):
each round of the queue, the candidates it verified so far (after a failed candidate, the
prefixes of its bisection), the check running on each, its elapsed time and the tail of its
output. Memory only, never logged: the log gets the attestations when the round ends, and a
restart ends the checks with it. The method `queue.running` reads it.

The queue's threads write here (a check's output as it is read); the loop reads. One lock."""
import re
import threading
from dataclasses import dataclass, field
from typing import Callable

from lonca.queue import CheckRun

from .methods import Call, method

TAIL_BYTES = 8 * 1024       # of each running check's output: enough to watch it, small to poll
KEPT_CANDIDATES = 64        # a round's candidates shown (a bisection of a batch of 256 is ~16)
# a session token, or the start of one: a check's output is shown, and must not show a token
_TOKEN = re.compile(r"lonca_(?:h_)?[0-9a-f]{8,}")


def without_tokens(text: str) -> str:
    return _TOKEN.sub("lonca_…(hidden)", text) if "lonca_" in text else text


@dataclass
class _Check:
    name: str
    attempt: int
    started_ms: int
    tail: bytearray = field(default_factory=bytearray)
    cut: bool = False
    ended_ms: int | None = None
    result: str | None = None
    exit: int | None = None

    def view(self) -> dict:
        text = self.tail.decode("utf-8", "replace")
        if self.cut and "\n" in text:   # from a whole line on
            text = text.split("\n", 1)[1]
        return {"check": self.name, "attempt": self.attempt, "started_ms": self.started_ms,
                "ended_ms": self.ended_ms, "result": self.result, "exit": self.exit,
                "tail": without_tokens(text), "tail_truncated": self.cut}


class Candidate:
    """One candidate tree of a round: the changes it holds, and its checks as they run. The
    queue's thread that verifies it passes it to `verify_tree` as its CheckWatch."""

    def __init__(self, lock: threading.Lock, clock: Callable[[], int], changes: list[str], commit: str, remote: bool):
        self._lock, self._clock = lock, clock
        self.changes, self.commit, self.remote = changes, commit, remote
        self.started_ms = clock()
        self.ended_ms: int | None = None
        self.ok: bool | None = None
        self.checks: list[_Check] = []

    def started(self, name: str, attempt: int) -> Callable[[bytes], None]:
        check = _Check(name, attempt, self._clock())
        with self._lock:
            self.checks.append(check)

        def output(chunk: bytes) -> None:
            with self._lock:
                check.tail += chunk
                if len(check.tail) > TAIL_BYTES:
                    del check.tail[:len(check.tail) - TAIL_BYTES]
                    check.cut = True
        return output

    def ended(self, name: str, attempt: int, run: CheckRun) -> None:
        with self._lock:
            check = next(c for c in reversed(self.checks) if c.name == name and c.attempt == attempt)
            check.ended_ms, check.result, check.exit = self._clock(), run.result, run.exit

    def finish(self, ok: bool) -> None:
        with self._lock:
            self.ended_ms, self.ok = self._clock(), ok

    def view(self) -> dict:
        return {"changes": list(self.changes), "commit": self.commit, "started_ms": self.started_ms,
                "ended_ms": self.ended_ms, "ok": self.ok, "remote": self.remote,
                "checks": [c.view() for c in self.checks]}


class Round:
    """One drain of a repository's queue (kind "integrate": a batch, its lanes and bisections) or
    the checks of a pending change before the decision (kind "review")."""

    def __init__(self, lock: threading.Lock, clock: Callable[[], int], kind: str, changes: list[str]):
        self._lock, self._clock = lock, clock
        self.kind, self.changes, self.started_ms = kind, changes, clock()
        self.candidates: list[Candidate] = []
        self.shown_from = 0   # candidates left out at the front (KEPT_CANDIDATES)

    def candidate(self, changes: list[str], commit: str, remote: bool = False) -> Candidate:
        c = Candidate(self._lock, self._clock, changes, commit, remote)
        with self._lock:
            self.candidates.append(c)
            if len(self.candidates) > KEPT_CANDIDATES:
                self.candidates.pop(0)
                self.shown_from += 1
        return c

    def view(self) -> dict:
        return {"kind": self.kind, "changes": list(self.changes), "started_ms": self.started_ms,
                "earlier_candidates": self.shown_from, "candidates": [c.view() for c in self.candidates]}


class RunningChecks:
    def __init__(self, clock: Callable[[], int]):
        self._clock = clock
        self._lock = threading.Lock()
        self._rounds: dict[str, list[Round]] = {}

    def begin(self, repo: str, kind: str, changes: list[str]) -> Round:
        r = Round(self._lock, self._clock, kind, list(changes))
        with self._lock:
            self._rounds.setdefault(repo, []).append(r)
        return r

    def end(self, repo: str, r: Round) -> None:
        with self._lock:
            rounds = self._rounds.get(repo, [])
            if r in rounds:
                rounds.remove(r)

    def view(self, repo: str) -> list[dict]:
        with self._lock:
            return [r.view() for r in self._rounds.get(repo, [])]


@method("queue.running", "human")
async def queue_running(call: Call) -> dict:
    """The rounds of the repository's merge queue running now; empty when it is idle."""
    d = call.ctx
    return {"now_ms": d.now_ms(), "tail_bytes": TAIL_BYTES, "rounds": d.running.view(call.repo)}


@method("queue.run", "any human")
async def queue_run(call: Call) -> dict:
    """Seed 001's queue.run: wake the merge queue now instead of within its own two seconds. The
    queue drains on its own task, so the answer never counts an integration (integrated stays 0
    under protocol 1); status follows what it lands."""
    call.ctx.queue_wake()
    return {"integrated": 0, "woken": True}
