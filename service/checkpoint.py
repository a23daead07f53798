"""A repository's replayed state as canonical JSON, so a start costs the entries since the last
checkpoint instead of the whole log (docs/decisions.md, "State checkpoints").

`dump` and `load` are exact inverses over what replay builds: a state loaded from a checkpoint at
seq n and moved on by the entries after n dumps the same bytes as one replayed from seq 1 (a unit
test holds them to it). What is derived (the lease index, sets by session, the policy object) is
rebuilt, not stored."""
import heapq
import json
import pickle
from collections import deque
from dataclasses import fields
from typing import NamedTuple

from lonca.canonical import canonical, sha256_hex

from .lease_model import Interest, LeaseSet, Reservation
from .settled import SettledChanges
from .state import STATUS_WINDOW, ChangeRec, PendingRec, RepoState, SessionRec, State
from .store import CheckpointRow
from .trunk_history import TrunkHistory

FORMAT = 7  # a checkpoint of another format is ignored (the log is replayed whole); 2 adds recovery and
           # enrolled_by, 3 flaky, 4: changes out of the queue settled, 5 redacted, 6: settled changes
           # in the settled_changes table, only the latest STATUS_WINDOW here, 7: trunks in the trunks
           # table, only the latest trunk_history.WINDOW here, oldest first
EVERY = 10_000  # entries between a repository's checkpoints while the worker runs


def _record(obj) -> dict:
    """A dataclass record's fields, as asdict gives them but without its deep copy (asdict took
    most of a checkpoint's time: 2.9 s at 10,000 changes). It shares the record's containers."""
    return {name: getattr(obj, name) for name in _FIELDS[type(obj)]}


_FIELDS = {cls: tuple(f.name for f in fields(cls))
           for cls in (SessionRec, LeaseSet, Interest, Reservation, ChangeRec, PendingRec)}


def dump(st: State, rs: RepoState) -> dict:
    """The state of `rs` as JSON values. It shares the state's containers: encode it (or copy it,
    as snapshot does) before the state moves on."""
    return {
        "format": FORMAT, "name": rs.name, "daemon_key": rs.daemon_key, "trunk": rs.trunk,
        "policy_id": rs.policy_id, "profile": rs.profile, "humans": rs.humans, "frozen": rs.frozen,
        "redacted": sorted(rs.redacted), "recovery": rs.recovery, "enrolled_by": rs.enrolled_by,
        "next_seq": rs.next_seq, "head_hash": rs.head_hash, "trunks": list(rs.trunks.recent.items()), "integrations": rs.integrations,
        "sessions": [_record(r) for r in rs.sessions.values()],
        "sets": [_record(s) for s in rs.sets.values()],
        "interests": [_record(i) for i in rs.interests],
        "reservations": [_record(r) for r in rs.reservations],
        "changes": [_record(c) for c in rs.changes.values()],   # in flight; the settled are in their table
        "pending": [_record(p) for p in rs.pending.values()],
        "queue": rs.queue,
        "verification_days": sorted(rs.verification_days.items()),
        "flaky": rs.flaky,
        "pins": {c: sorted(sets) for c, sets in rs.pins.items()},
        "events": rs.events,
        "live_sessions": list(rs.live_sessions), "gone_sessions": list(rs.gone_sessions),
        "done_changes": list(rs.settled.done), "recent": [_record(c) for c in rs.settled.recent.values()],
        "expiries": rs.expiries(), "beat_due": rs.beat_due,
        # the worker's, not the repository's: kept in each checkpoint, merged on load (a nonce
        # spent or a sign count seen in any repository stays so)
        "nonces": st.nonces, "sign_counts": st.sign_counts,
    }


def load(st: State, data: dict) -> RepoState:
    """Put the repository `data` holds into `st` and return it."""
    rs = RepoState(name=data["name"], daemon_key=data["daemon_key"], trunk=data["trunk"],
                   policy_id=data["policy_id"], profile=data["profile"], humans=data["humans"],
                   recovery=data["recovery"], enrolled_by=data["enrolled_by"],
                   frozen=data["frozen"], redacted=set(data["redacted"]), next_seq=data["next_seq"], head_hash=data["head_hash"],
                   integrations=data["integrations"], settled=SettledChanges(data["name"], st.settled_reader),
                   trunks=TrunkHistory(data["name"], st.trunk_reader))
    rs.trunks.recent = {commit: at for commit, at in data["trunks"]}
    rs.policy = st.policy_of(rs.name, rs.policy_id)
    rs.sessions = {d["id"]: SessionRec(**d) for d in data["sessions"]}
    for d in data["sets"]:
        s = LeaseSet(**d)
        rs.sets[s.id] = s
        rs.index.add(s)
        rs.sets_by_session.setdefault(s.session, set()).add(s.id)
    rs.interests = [Interest(**d) for d in data["interests"]]
    rs.reservations = [Reservation(**d) for d in data["reservations"]]
    rs.changes = {d["id"]: ChangeRec(**d) for d in data["changes"]}
    rs.settled.done.extend(data["done_changes"])
    for d in data["recent"]:
        rs.settled.recent[d["id"]] = ChangeRec(**d)
    rs.pending = {d["seq"]: PendingRec(**d) for d in data["pending"]}
    rs.queue = data["queue"]
    rs.verification_days = {day: ms for day, ms in data["verification_days"]}
    rs.flaky = data["flaky"]
    rs.pins = {c: set(sets) for c, sets in data["pins"].items()}
    rs.events = data["events"]
    rs.live_sessions = dict.fromkeys(data["live_sessions"])
    rs.gone_sessions = deque(data["gone_sessions"], maxlen=STATUS_WINDOW)
    rs._expiries = [tuple(x) for x in data["expiries"]]
    heapq.heapify(rs._expiries)
    rs.beat_due = data["beat_due"]
    for n, until in data["nonces"].items():
        st.nonces[n] = max(until, st.nonces.get(n, 0))
    for k, count in data["sign_counts"].items():
        st.sign_counts[k] = max(count, st.sign_counts.get(k, 0))
    st.repos[rs.name] = rs
    return rs


class Snapshot(NamedTuple):
    repo: str
    seq: int
    hash: str
    data: bytes     # the dump, pickled: a copy of it, taken in C at once


def snapshot(st: State, rs: RepoState) -> Snapshot:
    """`rs` as it is now, in a copy no later entry changes: taken on the event loop (or wherever
    the state is applied), it lets the checkpoint's encoding run on another thread. The copy costs
    a third of encoding (about 15 ms a 1,000 changes), and the pickle never leaves this process."""
    return Snapshot(rs.name, rs.next_seq - 1, rs.head_hash, pickle.dumps(dump(st, rs), protocol=pickle.HIGHEST_PROTOCOL))


def row(snap: Snapshot) -> CheckpointRow:
    """The checkpoint of a snapshot taken when every entry applied to it was durable."""
    text = canonical(pickle.loads(snap.data)).decode()
    return CheckpointRow(repo=snap.repo, seq=snap.seq, hash=snap.hash, format=FORMAT,
                         state=text, state_hash=sha256_hex(text.encode()))


def usable(cp: CheckpointRow | None, hash_at_seq: str | None) -> dict | None:
    """The checkpoint's state when it can stand for the log up to its seq: our format, intact,
    and the log's entry at that seq is the one it covers. None otherwise."""
    if cp is None or cp.format != FORMAT or hash_at_seq != cp.hash:
        return None
    if sha256_hex(cp.state.encode()) != cp.state_hash:
        return None
    return json.loads(cp.state)
