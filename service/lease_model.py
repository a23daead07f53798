"""Lease sets, interests and reservations, and when two lease items conflict.

Containment (seed 001, "lease item"): `path#Type` covers `path#Type.m`, `path#Type.<def>`,
`path#Type(key)` and `path#Type~2`; `path#<file>` covers every symbol of the file. Two inserts into
one container conflict only when their names meet; shared items never conflict with each other.

A section's name may hold dots (`R.md#Release 1.2` beside `R.md#Release 1`), so where a `nesting`
is given (id -> container id, from the symbol tables: symbols/facts.py) `A` covers `A.b` only if
`A.b` is nested in `A` there; an id the nesting does not know is read from its text, which covers
more, never less. Code names hold no dots: their ids are in no nesting, at the cost of one lookup."""
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .footprint import Footprint

FILE = "<file>"
KINDS = ("edit", "insert", "rename", "shared")
_SUFFIX_STARTS = (".", "(", "[", "~")


def split(symbol: str) -> tuple[str, str]:
    path, _, qual = symbol.partition("#")
    return path, qual


def qual_covers(a: str, b: str) -> bool:
    """Whether qualified name a covers b (same file)."""
    return a == FILE or a == b or (b.startswith(a) and b[len(a)] in _SUFFIX_STARTS)


def covers(a: str, b: str, nesting: dict[str, str] | None = None) -> bool:
    pa, qa = split(a)
    pb, qb = split(b)
    if pa != pb or not qual_covers(qa, qb):
        return False
    if not nesting or qa == FILE or qa == qb or qb[len(qa)] != "." or b not in nesting:
        return True
    while b in nesting:     # the dot may be part of a name: climb the containers as written
        b = nesting[b]
        if b == a:
            return True
    return False


def member(container: str, name: str) -> str:
    """The id of member `name` of a container: `p#C` -> `p#C.name`, `p#<file>` -> `p#name`."""
    path, qual = split(container)
    return f"{path}#{name}" if qual == FILE else f"{container}.{name}"


def items_conflict(x: dict, y: dict, nesting: dict[str, str] | None = None) -> bool:
    """Whether items of two different sessions conflict."""
    if x["kind"] == "shared" and y["kind"] == "shared":
        return False
    sx, sy = x["symbol"], y["symbol"]
    if x["kind"] == "insert" and y["kind"] == "insert":
        if sx != sy:
            return covers(sx, sy, nesting) or covers(sy, sx, nesting)
        return bool(set(x.get("names") or ()) & set(y.get("names") or ()))
    for ins, other in ((x, y), (y, x)):
        if ins["kind"] == "insert" and other["kind"] != "insert":
            c, so = ins["symbol"], other["symbol"]
            if covers(so, c, nesting):
                return True  # editing the whole container while someone adds to it
            return any(covers(member(c, n), so, nesting) or covers(so, member(c, n), nesting) for n in ins.get("names") or ())
    return covers(sx, sy, nesting) or covers(sy, sx, nesting)


def any_conflict(xs: list[dict], ys: list[dict], nesting: dict[str, str] | None = None) -> bool:
    """Whether an item of `xs` conflicts with one of `ys`."""
    return any(items_conflict(a, b, nesting) for a in xs for b in ys)


@dataclass
class LeaseSet:
    id: str
    session: str  # who holds it now (a child, while lent)
    owner: str  # who acquired it (gets it back from a child)
    items: list[dict]
    intent: str
    acquired_ms: int
    expires_ms: int
    wanted_ms: int | None = None  # last time another session's acquire was denied by it
    pinned: dict[str, list[dict]] = field(default_factory=dict)  # change id -> items

    def to_json(self, live: bool) -> dict:
        return {"set": self.id, "session": self.session, "items": self.items if live else [],
                "intent": self.intent, "expires_ms": self.expires_ms,
                "pinned": [{"change": c, "items": it} for c, it in sorted(self.pinned.items())]}


@dataclass
class Interest:
    session: str
    items: list[dict]
    intent: str
    created_ms: int
    blocks_until_ms: int
    seq: int

    def to_json(self) -> dict:
        return {"session": self.session, "items": self.items, "intent": self.intent,
                "created_ms": self.created_ms, "blocks_until_ms": self.blocks_until_ms, "seq": self.seq}


@dataclass
class Reservation:
    session: str
    items: list[dict]
    until_ms: int
    intent: str

    def to_json(self) -> dict:
        return {"session": self.session, "items": self.items, "until_ms": self.until_ms}


class LeaseIndex:
    """Held items by path, then by set: a conflict check reads only the items on its own paths,
    so it costs the same however many unrelated leases are held.

    An entry is an item's place in its set, (position, pinned change or None), not the item: a
    tuple of plain values is dropped from the collector's watch, one holding an item dict is not,
    and 100 000 held items made 200 000 objects that every full collection walked (0.1–0.3 s,
    the GIL held, every request waiting: bench leases). So every change of a set's items goes
    through remove, then add, as before."""

    def __init__(self):
        self.by_path: dict[str, dict[str, tuple[tuple[int, str | None], ...]]] = {}
        self._sets: dict[str, LeaseSet] = {}
        # while the log's writer applies an entry: what it changes (service/footprint.py)
        self.touched: "Footprint | None" = None

    def touch(self, s: LeaseSet) -> None:
        """The set changed (indexed or not): noted in the footprint of the entry being applied."""
        if self.touched is not None:
            self.touched.note(s)

    def add(self, s: LeaseSet) -> None:
        """(Re-)index the set's items and pinned items; adding a set twice is the same as once."""
        self.touch(s)
        per_path: dict[str, list[tuple[int, str | None]]] = {}
        for change, items in [(None, s.items), *s.pinned.items()]:
            for pos, item in enumerate(items):
                per_path.setdefault(split(item["symbol"])[0], []).append((pos, change))
        for path, entries in per_path.items():
            self.by_path.setdefault(path, {})[s.id] = tuple(entries)
        self._sets[s.id] = s

    def remove(self, s: LeaseSet) -> None:
        self.touch(s)
        for path in {split(i["symbol"])[0] for i in s.items + [i for its in s.pinned.values() for i in its]}:
            sets = self.by_path.get(path)
            if sets is not None:
                sets.pop(s.id, None)
                if not sets:
                    del self.by_path[path]
        self._sets.pop(s.id, None)

    def on_path(self, path: str) -> dict[str, list[tuple[dict, str | None]]]:
        """set id -> (item, pinned change or None) of what each set holds on `path`."""
        out = {}
        for sid, entries in self.by_path.get(path, {}).items():
            s = self._sets[sid]
            out[sid] = [(s.items[pos] if change is None else s.pinned[change][pos], change) for pos, change in entries]
        return out
