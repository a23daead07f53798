"""Every commit that was a repository's trunk, with the integrations trunk had counted then: a
proposal's base is unknown_base when it never was trunk, stale_trunk when it is more than
max_behind integrations behind, and trunk.distance answers `behind` from it.

A dict of every trunk ever was what the worker's memory grew by with each integration once the
settled changes had left it (docs/decisions.md, "What the soak's worker grows by once trunk is
full"). So memory keeps the latest WINDOW trunks (they are in the checkpoint), and the others
are in the `trunks` table (service/trunk_store.py), written by the log writer in the commit of
the entry that made them trunk, as for settled changes (service/settled.py). A method that asks
about an older commit reads the table on a thread (`TrunkHistory.find`), which leaves the
answer here for the decision that follows on the event loop.

A row is keyed by the integration count, one per entry that moved trunk, so a replay's rows
are the same whenever it writes them; a commit that was trunk twice answers its latest count,
as the dict did. Without a reader (a replay outside the worker: the unit tests, a restore
before its rows are written) every trunk stays here."""
import asyncio
from typing import Protocol

WINDOW = 1024   # the latest trunks held (a base within max_behind's default, 1,000, is among them)
RECALLED = 64   # answers read from the table and kept for the next read (not state)


class Reader(Protocol):
    """The trunks table (service/trunk_store.py), read on the caller's thread."""

    def position(self, repo: str, commit: str) -> int | None: ...


class TrunkHistory:
    __slots__ = ("repo", "reader", "recent", "unwritten", "recalled")

    def __init__(self, repo: str, reader: Reader | None) -> None:
        self.repo = repo
        self.reader = reader
        self.recent: dict[str, int] = {}        # the latest WINDOW trunks -> integrations, oldest first: state
        self.unwritten: dict[str, int] = {}     # made trunk by entries whose rows are not committed yet
        self.recalled: dict[str, int | None] = {}   # the table's answers (None: never trunk): a cache

    def add(self, commit: str, integrations: int) -> None:
        """`commit` is trunk now, after `integrations` integrations."""
        self.recent.pop(commit, None)
        self.recent[commit] = integrations
        if len(self.recent) > WINDOW:
            del self.recent[next(iter(self.recent))]
        self.unwritten[commit] = integrations
        self.recalled.pop(commit, None)

    def known(self, commit: str) -> bool:
        """Whether memory answers for `commit` (a table read is then not needed)."""
        return commit in self.recent or commit in self.unwritten or commit in self.recalled or self.reader is None

    def position(self, commit: str) -> int | None:
        """The integrations trunk had counted when `commit` last became trunk; None if it never
        was. From memory, else from the table on this thread: a method reads it on a thread first
        (`recall`), so the decision after it does not."""
        for found in (self.recent, self.unwritten, self.recalled):
            if commit in found:
                return found[commit]
        if self.reader is None:
            return None
        at = self.reader.position(self.repo, commit)
        self.recall(commit, at)
        return at

    async def find(self, commit: str) -> int | None:
        """`position`, for a method on the event loop: a commit memory does not know is read from
        the table on a thread, and the answer kept for the decision that follows on the loop."""
        if self.reader is not None and not self.known(commit):
            self.recall(commit, await asyncio.to_thread(self.reader.position, self.repo, commit))
        return self.position(commit)

    def recall(self, commit: str, at: int | None) -> None:
        """Keep the table's answer about `commit` for the next read: the latest RECALLED."""
        if commit not in self.recent and commit not in self.unwritten:
            self.recalled[commit] = at
            while len(self.recalled) > RECALLED:
                del self.recalled[next(iter(self.recalled))]

    def to_write(self) -> list[tuple[str, int]]:
        """(commit, integrations) made trunk since the last write; nothing without a table."""
        return list(self.unwritten.items()) if self.reader is not None else []

    def written(self, rows) -> None:
        """These (commit, integrations) are committed: the table answers for them from now on."""
        for commit, at in rows:
            if self.unwritten.get(commit) == at:
                del self.unwritten[commit]
