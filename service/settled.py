"""A repository's changes out of the queue for good (integrated, failed, denied, withdrawn,
replaced): in the worker's database, not in its memory.

A record of every change ever was what the worker's memory grew by with history (1.9 KB a change
with the sharing of ChangeRec.settle, about 3.5 KB once its malloc pages are counted: the soak
bench, docs/decisions.md). So a change that settles leaves `RepoState.changes` (the changes in
flight) for this object: its record is held until the entry that settled it is committed, when
the log writer writes it to the `settled_changes` table in the same transaction
(service/settled_store.py); then only the latest STATUS_WINDOW settled stay, which `status`
lists. A read of any other settled change goes to the table.

A row is keyed by the entry that settled the record, so every version a change settled at is
kept: a replay (from a checkpoint, or after a failed commit) asks for a change as it was before
the entry being applied (`before_seq`), while the table may already hold what later entries
settled. Without a reader (a replay outside the worker: the unit tests, a restore before its
rows are written) every record stays here, as before."""
from collections import deque
from typing import TYPE_CHECKING, Iterable, Protocol

if TYPE_CHECKING:
    from .state import ChangeRec

STATUS_WINDOW = 20  # `status` lists every live session and open change, and this many over or done
RECALLED = 64       # settled records read from the table and kept for the next read (not state)


class Reader(Protocol):
    """The table of settled changes (service/settled_store.py), read on the caller's thread."""

    def get(self, repo: str, change: str, before_seq: int | None) -> "ChangeRec | None": ...

    def ids(self, repo: str, prefix: str) -> list[str]: ...

    def integrated(self, repo: str, sessions: Iterable[str]) -> list["ChangeRec"]: ...


class SettledChanges:
    __slots__ = ("repo", "reader", "done", "recent", "unwritten", "latest", "recalled", "minted")

    def __init__(self, repo: str, reader: Reader | None) -> None:
        self.repo = repo
        self.reader = reader
        self.done: deque[str] = deque(maxlen=STATUS_WINDOW)    # the latest to leave the queue, oldest first
        self.recent: dict[str, ChangeRec] = {}   # the records of `done` (status lists them): part of the state
        # settled by entries not committed yet, by (change, seq of the entry); their latest by change
        self.unwritten: dict[tuple[str, int], ChangeRec] = {}
        self.latest: dict[str, tuple[int, ChangeRec]] = {}
        self.recalled: dict[str, ChangeRec] = {}  # read from the table: a cache, never dumped
        self.minted: str | None = None  # a new change's id, until its entry's reducer looks it up (mint)

    def add(self, rec: "ChangeRec", seq: int) -> None:
        """`rec` settled at the entry `seq` (rec.settle has run)."""
        dropped = self.done[0] if len(self.done) == self.done.maxlen else None
        self.done.append(rec.id)
        self.recent[rec.id] = rec
        if dropped is not None and dropped not in self.done:
            self.recent.pop(dropped, None)
        self.unwritten[(rec.id, seq)] = rec
        self.latest[rec.id] = (seq, rec)
        self.recalled.pop(rec.id, None)

    def to_write(self) -> list[tuple[str, int, "ChangeRec"]]:
        """(change, seq, record) of what settled since the last write (a recovery's replay writes
        nothing: its rows go with the next commit); nothing without a table."""
        if self.reader is None:
            return []
        return [(c, s, rec) for (c, s), rec in self.unwritten.items()]

    def written(self, keys: Iterable[tuple[str, int]]) -> None:
        """These rows are committed: the table answers for them from now on."""
        for change, seq in keys:
            self.unwritten.pop((change, seq), None)
            if self.latest.get(change, (None,))[0] == seq:
                del self.latest[change]

    def held(self, change: str) -> "ChangeRec | None":
        """The change's record as it last settled, when memory holds it (it settled lately)."""
        held = self.latest.get(change)
        if held is not None:
            return held[1]
        return self.recent.get(change) or self.recalled.get(change)

    def get(self, change: str, before_seq: int | None = None) -> "ChangeRec | None":
        """The change's record as it last settled (before the entry `before_seq`, in a replay):
        from memory, else from the table on this thread (the reducers' and decisions' rare case:
        a new version of a settled change; methods read the table on a thread, `recall`)."""
        rec = self.held(change)
        if rec is not None or self.reader is None:
            return rec
        if change == self.minted:   # no version of it was ever logged
            self.minted = None
            return None
        rec = self.reader.get(self.repo, change, before_seq)
        if rec is not None and before_seq is None:   # a replay's reads would fill it with the past
            self.recall(rec)
        return rec

    def mint(self, change: str) -> str:
        """`change` is an id the worker just made for a new change whose entry is being decided:
        the lookup its reducer makes (a new version takes the place of the one before) answers
        None without the table. It read the table for every proposal, on the event loop inside
        the writer's decisions: 12 % of the loop's samples under bench scale (docs/decisions.md,
        "A preview waits only for the entries in flight on its paths"). An id that is never
        logged (its decision refused) is forgotten at the next: no entry of it exists."""
        self.minted = change
        return change

    def recall(self, rec: "ChangeRec") -> None:
        """Keep a record read from the table for the next read (the decision and reducer that
        follow a method's read): the latest RECALLED, on the event loop."""
        if rec.id not in self.latest and rec.id not in self.recent:
            self.recalled[rec.id] = rec
            while len(self.recalled) > RECALLED:
                del self.recalled[next(iter(self.recalled))]

    def held_ids(self, prefix: str) -> set[str]:
        """Ids in memory that start with `prefix` (the table's: Reader.ids, on a thread)."""
        return {c for c in (*self.latest, *self.recent) if c.startswith(prefix)}

    def held_integrated(self, sessions: set[str]) -> list["ChangeRec"]:
        """The integrated changes of these sessions that memory holds (the table's: Reader.integrated)."""
        return [rec for _, rec in self.latest.values() if rec.session in sessions and rec.status["status"] == "integrated"]
