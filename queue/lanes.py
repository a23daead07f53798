"""Independent lanes: which queued changes may be verified apart, from their symbol facts.

Two changes depend on each other when they touch a common file or symbol, or when the `affected`
of one (the symbols of its base that mention what it re-signs, renames or deletes) names a symbol
of a file the other touches. A change whose `affected` was cut short (`affected_more` > 0) or that
has no facts may reach anything: it depends on every other. A lane is a connected group of that
relation, kept in queue order; changes of different lanes are independent. A change with a
human's `priority` moves ahead of the changes it is independent of (`ahead`).

Independence here is what the facts can see, not a proof that two changes compose: a change that
calls a function another one deletes, from a file neither base mentions it in, is invisible to
both. So a lane's own result never vouches for a tree holding another lane (docs/decisions.md,
"Independent lanes"): the rounds in lane_round.py land only trees whose checks passed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Footprint:
    paths: frozenset[str]       # files added, modified or deleted
    symbols: frozenset[str]     # symbols edited, added, deleted or renamed
    affected: frozenset[str]    # symbols of the base that mention what it changes
    everything: bool = False    # depends on every other change

    def touches_symbol_of(self, symbol: str) -> bool:
        """A symbol `path#name` of a file this change touches, or one of its own symbols.
        Compared with each path and its `#`, since a path may hold a `#` itself."""
        return symbol in self.symbols or any(symbol.startswith(p + "#") for p in self.paths)


def footprint(paths: Iterable[str], facts: dict | None) -> Footprint:
    """A queued change's footprint from its paths and logged facts."""
    if not facts:
        return Footprint(frozenset(paths), frozenset(), frozenset(), everything=True)
    symbols = {*facts.get("edits", ()), *facts.get("adds", ()), *facts.get("deletes", ())}
    symbols.update(name for pair in facts.get("renames", ()) for name in pair)
    return Footprint(frozenset(paths), frozenset(symbols), frozenset(facts.get("affected", ())),
                     everything=int(facts.get("affected_more") or 0) > 0)


def depends(a: Footprint, b: Footprint) -> bool:
    """Whether `a` and `b` must be verified in one lane (symmetric)."""
    if a.everything or b.everything:
        return True
    if a.paths & b.paths or a.symbols & b.symbols:
        return True
    return any(b.touches_symbol_of(s) for s in a.affected) or any(a.touches_symbol_of(s) for s in b.affected)


def partition(prints: list[Footprint]) -> list[list[int]]:
    """The lanes of changes given in queue order: lists of their indexes, each in queue order,
    ordered by their first change. Union-find over the pairs that depend (n is a batch, at
    most a few dozen, so the pairs are cheap)."""
    parent = list(range(len(prints)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(prints)):
        for j in range(i):
            if depends(prints[i], prints[j]):
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)   # a lane's root is its first change
    lanes: dict[int, list[int]] = {}
    for i in range(len(prints)):
        lanes.setdefault(root(i), []).append(i)
    return [lanes[r] for r in sorted(lanes)]


def ahead(prints: list[Footprint], urgent: set[int]) -> list[int]:
    """The queue's order (indexes) with the urgent changes first (a human-signed `priority`).
    An urgent change takes along every earlier change it depends on, transitively, so two
    changes that depend on each other never swap: the one proposed first is integrated first
    and the later one meets it as it was proposed to. Everything else keeps its place."""
    pulled: set[int] = set()
    todo = sorted(urgent)
    while todo:
        k = todo.pop()
        if k in pulled:
            continue
        pulled.add(k)
        todo.extend(i for i in range(k) if i not in pulled and depends(prints[i], prints[k]))
    return sorted(pulled) + [i for i in range(len(prints)) if i not in pulled]


def clear_of(prints: list[Footprint], held: list[Footprint]) -> list[int]:
    """The indexes, in queue order, of the changes that may be verified before the `held`
    changes are decided (a round in flight whose outcome is not known yet): those that depend on
    none of them, nor on an earlier change left out for that reason. What is left out waits, so
    two changes that depend on each other are still integrated in the order they were queued."""
    waiting = list(held)
    out = []
    for i, p in enumerate(prints):
        if any(depends(p, h) for h in waiting):
            waiting.append(p)
        else:
            out.append(i)
    return out
