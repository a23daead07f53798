"""A change's story from the log: each version proposed, approvals, rejections and comments, withdrawal,
the checks of each integration attempt and the commit it became. The change page is drawn again
at every log entry, so each change's timeline is kept with the seq it has read up to, and only
the entries logged since are read (one short `log` call for a page already open)."""
from collections import OrderedDict
from dataclasses import dataclass, field

from lonca import protocol

KEPT = 256          # changes whose timeline is kept (the console's memory stays bounded)
PAGE = 1000         # the most entries one `log` call answers
MAX_PAGES = 20      # a first view reads at most this far past the change's first version


@dataclass
class Timeline:
    next_seq: int
    versions: list[int]             # seqs of the change.propose entries of this change
    items: list[dict] = field(default_factory=list)
    cut: bool = False               # the first view stopped before the log's end

    def commits(self) -> dict[int, str]:
        """version -> its commit."""
        return {i["version"]: i["commit"] for i in self.items if i["kind"] == "proposed" and i["commit"]}

    def comments(self) -> list[dict]:
        return [i for i in self.items if i["kind"] == "commented" and i["outcome"] == "allow"]

    def notes_for(self, target_seq: int) -> list[dict]:
        """The approvals of one version, with their notes."""
        return [i for i in self.items if i["kind"] == "approved" and i["target_seq"] == target_seq]


def _item(kind: str, en: dict, **more) -> dict:
    return {"kind": kind, "seq": en["seq"], "time_ms": en["time_ms"], "actor": protocol.actor_label(en["actor"]),
            "outcome": en["decision"]["outcome"], "reasons": en["decision"]["reasons"], **more}


def _checks(en: dict) -> list[dict]:
    """Each attempt of each check, with what says why one failed (its exit, a timeout, output over
    the cap): never only "error in 4 ms". A retried check shows every attempt, its pass marked flaky."""
    out = []
    for a in en.get("evidence") or []:
        d = a.get("details") or {}
        why = [f"exit {d['exit']}"] if "exit" in d and d["exit"] != "0" else []
        why += ["timed out"] if d.get("timed_out") == "true" else []
        why += ["output over the cap"] if d.get("output_over_cap") == "true" else []
        out.append({"check": a["check"], "name": d.get("name"), "result": a["result"], "duration_ms": d.get("duration_ms"),
                    "why": ", ".join(why), "attempt": d.get("attempt") if d.get("attempts", "1") != "1" else None,
                    "flaky": d.get("flaky") == "true"})
    return out


def read_entry(t: Timeline, change: str, en: dict) -> None:
    """Add what one log entry says of `change` to its timeline."""
    op = en["op"]
    kind = op.get("op")
    if kind == "change.propose" and op.get("change") == change:
        if en["seq"] not in t.versions:
            t.versions.append(en["seq"])
        t.items.append(_item("proposed", en, version=t.versions.index(en["seq"]) + 1, commit=op.get("commit")))
    elif kind == "change.propose" and f"replaces:{change}" in en["decision"]["reasons"]:
        t.items.append(_item("replaced", en, by=op.get("change")))
    elif kind in ("approve", "reject") and op.get("target_seq") in t.versions:
        t.items.append(_item("approved" if kind == "approve" else "rejected", en, target_seq=op["target_seq"],
                             note=op.get("note") or op.get("reason") or "", checks=op.get("checks") or []))
    elif kind == "comment" and op.get("target_seq") in t.versions:
        t.items.append(_item("commented", en, target_seq=op["target_seq"], version=t.versions.index(op["target_seq"]) + 1,
                             path=op.get("path"), line=op.get("line"), symbol=op.get("symbol"), text=op.get("text") or "",
                             request_changes=bool(op.get("request_changes"))))
    elif kind == "change.check" and op.get("change") == change:
        version = next((i["version"] for i in t.items if i["kind"] == "proposed" and i["commit"] == op.get("commit")), None)
        t.items.append(_item("checked", en, commit=op.get("commit"), version=version, checks=_checks(en)))
    elif kind == "change.withdraw" and op.get("change") == change:
        t.items.append(_item("withdrawn", en))
    elif kind == "change.integrate" and op.get("change") == change:
        t.items.append(_item("integrated" if en["decision"]["outcome"] == "allow" else "not integrated", en,
                             commit=op.get("merged"), conflicts=op.get("conflicts") or [], checks=_checks(en)))
    elif kind == "change.integrate_batch" and any(c == change for c, _ in op.get("merged") or []):
        commit = next(m for c, m in op["merged"] if c == change)
        t.items.append(_item("integrated", en, commit=commit, conflicts=[], checks=_checks(en),
                             batch=len(op["merged"])))


class Timelines:
    def __init__(self):
        self._kept: OrderedDict[tuple[str, str], Timeline] = OrderedDict()

    async def of(self, read, repo: str, change: str, versions: list[int], next_seq: int) -> Timeline:
        """The timeline of `change` up to `next_seq`; `read(from, limit)` answers the log's
        entries. A change seen anew starts at its first version's entry."""
        t = self._kept.get((repo, change))
        if t is None:
            t = Timeline(next_seq=min(versions) if versions else next_seq, versions=list(versions))
        pages, t.cut = 0, False
        while t.next_seq < next_seq:
            if pages == MAX_PAGES:
                t.cut = True
                break
            entries = await read(t.next_seq, PAGE)
            if not entries:
                break
            for e in entries:
                if e["entry"]["seq"] >= t.next_seq:     # another drawing of the page may have read it meanwhile
                    read_entry(t, change, e["entry"])
            t.next_seq = max(t.next_seq, entries[-1]["entry"]["seq"] + 1)
            pages += 1
        self._kept[(repo, change)] = t
        self._kept.move_to_end((repo, change))
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return t
