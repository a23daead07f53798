"""What the queue page plots and times, read from the log: when each change entered the queue
and when it was integrated. Kept per repository with the seq read up to, so an open queue page
reads only what was logged since (one short `log` call an entry), like timeline.py."""
from dataclasses import dataclass, field

PAGE = 1000         # the most entries one `log` call answers
FIRST_READ = 20     # pages a first view reads back from the log's end: older integrations are not plotted
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
KEPT_MS = 2 * DAY_MS


@dataclass
class QueueStats:
    next_seq: int
    queued_ms: dict[str, int] = field(default_factory=dict)        # change -> when it last entered the queue
    proposed_ms: dict[str, int] = field(default_factory=dict)      # change -> its first version's entry time
    changes_of: dict[int, str] = field(default_factory=dict)       # change.propose seq -> change
    integrations: list[tuple[int, str, str, int | None]] = field(default_factory=list)  # (time, change, commit, ms from proposal)
    cut: bool = False

    def read(self, en: dict) -> None:
        op, kind, outcome = en["op"], en["op"].get("op"), en["decision"]["outcome"]
        if kind == "change.propose":
            self.changes_of[en["seq"]] = op["change"]
            self.proposed_ms.setdefault(op["change"], en["time_ms"])
            if outcome == "allow":
                self.queued_ms[op["change"]] = en["time_ms"]
        elif kind == "approve" and outcome == "allow" and op.get("target_seq") in self.changes_of:
            self.queued_ms[self.changes_of[op["target_seq"]]] = en["time_ms"]
        elif kind == "change.integrate" and outcome == "allow":
            self._integrated(en, [(op["change"], op.get("merged") or "")])
        elif kind == "change.integrate_batch" and outcome == "allow":
            self._integrated(en, [(c, m) for c, m in op.get("merged") or []])

    def _integrated(self, en: dict, merged: list[tuple[str, str]]) -> None:
        for change, commit in merged:
            start = self.proposed_ms.get(change)
            self.integrations.append((en["time_ms"], change, commit, en["time_ms"] - start if start else None))
        cutoff = en["time_ms"] - KEPT_MS
        if self.integrations and self.integrations[0][0] < cutoff:
            self.integrations = [i for i in self.integrations if i[0] >= cutoff]


class QueueStatsKept:
    def __init__(self):
        self._kept: dict[str, QueueStats] = {}

    async def of(self, read, repo: str, next_seq: int) -> QueueStats:
        """`read(from, limit)` answers the log's entries."""
        s = self._kept.get(repo)
        if s is None:
            s = QueueStats(next_seq=max(1, next_seq - FIRST_READ * PAGE))
            s.cut = s.next_seq > 1
            self._kept[repo] = s
        while s.next_seq < next_seq:
            entries = await read(s.next_seq, PAGE)
            if not entries:
                break
            for e in entries:
                if e["entry"]["seq"] >= s.next_seq:     # another drawing of the page may have read it meanwhile
                    s.read(e["entry"])
            s.next_seq = max(s.next_seq, entries[-1]["entry"]["seq"] + 1)
        return s


def percentile(values: list[int], q: float) -> int:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


def hourly(s: QueueStats, now_ms: int) -> list[dict]:
    """The last 24 hours, oldest first: integrations, and the median and p95 of the time from
    proposal to integration of the changes integrated in each hour."""
    start = now_ms - DAY_MS
    hours: list[list[int | None]] = [[] for _ in range(24)]
    for time_ms, _, _, took in s.integrations:
        if start <= time_ms <= now_ms:
            hours[min(23, (time_ms - start) // HOUR_MS)].append(took)
    out = []
    for i, h in enumerate(hours):
        took = [t for t in h if t is not None]
        out.append({"start_ms": start + i * HOUR_MS, "count": len(h),
                    "median": percentile(took, 0.5) if took else None, "p95": percentile(took, 0.95) if took else None})
    return out


def day_summary(s: QueueStats, now_ms: int) -> dict:
    took = [t for time_ms, _, _, t in s.integrations if now_ms - DAY_MS <= time_ms <= now_ms and t is not None]
    return {"count": len(took), "median": percentile(took, 0.5) if took else None,
            "p95": percentile(took, 0.95) if took else None}
