"""What an entry applied but not yet durable changed, for the reads that wait only for the entries
their answer depends on (LogWriter.settled_for; docs/decisions.md, "A preview waits only for the
entries in flight on its paths").

A footprint is the paths whose leases an entry changed and the sessions whose records or lease
sets it changed. It is taken only for the entries whose reducers change nothing else a
path-scoped read sees; any other entry's footprint is None, which meets every read:
- the kinds in PATH_SCOPED (leases, proposals, heartbeats, integrations): beside the lease index,
  their reducers change the changes in flight, trunk, events and the quota counters, none of
  which a path-scoped read reads;
- the lease sets they change are noted as they change (LeaseIndex.touch): every add to and
  removal from the lease index, and the changes of a set that keep its place there: a new expiry,
  a new holder (RepoState.schedule_expiry, move_set), wanted by a refused acquire;
- the sessions whose records they change are the actor's and the one the op names (a heartbeat);
- a human's signed entry, an entry by whose time something expires (a set, a session, a
  heartbeat's check: `_expire` may drop leases anywhere) and any entry while the repository has
  interests or reservations (`_reserve` and `_got` change them on other paths) are None."""
from .lease_model import LeaseSet, split
from .state import RepoState, State

PATH_SCOPED = frozenset({"lease.acquire", "lease.release", "lease.renew", "change.propose", "observe",
                         "change.integrate", "change.integrate_batch"})


class Footprint:
    __slots__ = ("paths", "sessions")

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.sessions: set[str] = set()

    def note(self, s: LeaseSet) -> None:
        """The set changed: its paths (before or after the change: both are noted) and holders."""
        self.paths.update(split(i["symbol"])[0] for i in s.items)
        for items in s.pinned.values():
            self.paths.update(split(i["symbol"])[0] for i in items)
        self.sessions.update((s.session, s.owner))

    def meets(self, paths: set[str], sessions: set[str]) -> bool:
        return not (self.paths.isdisjoint(paths) and self.sessions.isdisjoint(sessions))


def apply(state: State, repo: str, entry: dict, hash_hex: str) -> Footprint | None:
    """State.apply, and the entry's footprint."""
    rs = state.repo(repo)
    fp = watch(rs, entry)
    try:
        state.apply(repo, entry, hash_hex)
    finally:
        fp = taken(rs, fp)
    return fp


def watch(rs: RepoState | None, entry: dict) -> Footprint | None:
    """Before the entry is applied: its footprint so far, noting the lease sets it changes from
    now until `taken`; None when it may change more than paths and sessions."""
    op = entry["op"]
    if (rs is None or op["op"] not in PATH_SCOPED or entry.get("human") or rs.interests or rs.reservations
            or (rs._expiries and rs._expiries[0][0] <= entry["time_ms"])):
        return None
    fp = Footprint()
    fp.sessions.update(x for x in (entry["actor"].get("session"), op.get("session")) if x)
    rs.index.touched = fp
    return fp


def taken(rs: RepoState | None, fp: Footprint | None) -> Footprint | None:
    """After the entry was applied (or failed to be): the footprint, None if it left interests or
    reservations behind."""
    if fp is None or rs is None:
        return None
    rs.index.touched = None
    return None if rs.interests or rs.reservations else fp
