"""Batches: up to N queued changes become one candidate, verified once.

Each change is integrated onto the previous one's result (trunk first); one that conflicts with
the candidate is taken out before anything is verified. The tip is verified; when it fails, a
bisection over the prefixes finds the first change whose prefix fails, with O(log n)
verifications (prefix 0 is trunk, taken as good; the full candidate is known bad). The good
prefix lands, the culprit is rejected with the reasons of its failing prefix, and the changes
after it go back to the queue, to be tried again without it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import pygit2

from lonca.symbols import SymbolCache

from .merge import Integration, integrate


def find_culprit(n: int, verify: Callable[[int], bool]) -> int:
    """The 0-based index of the first change whose prefix fails, given that the prefix of
    length n fails and the empty prefix passes. `verify(k)` verifies the first k changes;
    it is called about log2(n) times, never for 0 or n."""
    good, bad = 0, n
    while bad - good > 1:
        mid = (good + bad) // 2
        if verify(mid):
            good = mid
        else:
            bad = mid
    return bad - 1


def find_culprit_wide(n: int, verify_many: Callable[[list[int]], dict[int, bool]], width: int) -> int:
    """`find_culprit` with up to `width` prefixes verified at once (speculation over the prefixes
    of one dependent run: A, A+B, A+B+C together): about log(n)/log(width + 1) waves instead of
    log2(n) checks in a row. `verify_many(points)` answers each prefix length given; width 1 is
    `find_culprit` exactly."""
    good, bad = 0, n
    while bad - good > 1:
        span = bad - good
        points = sorted({good + span * i // (width + 1) for i in range(1, width + 1)} - {good, bad})
        ok = verify_many(points)
        first_bad = min((p for p in points if not ok[p]), default=bad)
        good = max([good] + [p for p in points if ok[p] and p < first_bad])
        bad = first_bad
    return bad - 1


@dataclass(frozen=True)
class QueuedChange:
    change: str                 # the change id
    commit: str                 # the proposed commit
    base: str                   # the commit it was proposed on
    message: str
    author: pygit2.Signature


@dataclass
class Verdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    detail: Any = None          # what the caller wants back (check results, attestations)


@dataclass
class BatchOutcome:
    trunk_before: str
    landed: list[tuple[QueuedChange, str]] = field(default_factory=list)  # (change, commit)
    conflicted: list[tuple[QueuedChange, Integration]] = field(default_factory=list)
    rejected: list[tuple[QueuedChange, Verdict]] = field(default_factory=list)
    requeued: list[QueuedChange] = field(default_factory=list)
    verdicts: dict[int, Verdict] = field(default_factory=dict)  # by prefix length verified
    landed_verdict: Verdict | None = None   # the passing verdict of exactly the landed tree

    @property
    def trunk_after(self) -> str:
        return self.landed[-1][1] if self.landed else self.trunk_before


Merges = dict[tuple[str, str], Integration]     # (tip, change id) -> the change integrated on tip


def integrate_chain(repo: pygit2.Repository, trunk: str, changes: list[QueuedChange], committer: pygit2.Signature,
                    cache: SymbolCache, out: BatchOutcome, merges: Merges | None = None) -> list[tuple[QueuedChange, str]]:
    """`changes` integrated one on the other from `trunk`: (change, candidate commit) of each that
    merged; one that conflicts goes to `out.conflicted` and the next merges onto the last good one.
    `merges` (one round's: the same committer and authors) keeps each integration by its tip and
    change, so the candidates of a round that share a prefix (the union, its first group, the
    tree of what passed) merge it once: the same inputs make the same commit."""
    chain: list[tuple[QueuedChange, str]] = []
    tip = trunk
    for ch in changes:
        key = (tip, ch.change)
        integration = merges.get(key) if merges is not None else None
        if integration is None:
            integration = integrate(repo, tip, ch.commit, ch.base, ch.message, ch.author, committer, cache)
            if merges is not None:
                merges[key] = integration
        if integration.commit is None:
            out.conflicted.append((ch, integration))
            continue
        chain.append((ch, integration.commit))
        tip = integration.commit
    return chain


def run_batch(repo: pygit2.Repository, trunk: str, changes: list[QueuedChange],
              verify: Callable[[list[QueuedChange], str], Verdict],
              committer: pygit2.Signature | None = None,
              cache: SymbolCache | None = None, width: int = 1, merges: Merges | None = None) -> BatchOutcome:
    """Integrate `changes` (in queue order, at most the policy's batch size) onto `trunk` and
    verify them as one candidate. `verify(prefix, commit)` checks the candidate commit holding
    `prefix`; with `width` > 1 a failing candidate's prefixes are verified that many at once, on
    threads of their own (`verify` then opens its own handle on the store). Creates commits
    only; the caller logs the outcome and moves trunk."""
    cache = cache if cache is not None else SymbolCache()
    out = BatchOutcome(trunk)
    chain = integrate_chain(repo, trunk, changes, committer, cache, out, merges)
    if not chain:
        return out

    def passes(k: int) -> bool:
        if k not in out.verdicts:
            out.verdicts[k] = verify([c for c, _ in chain[:k]], chain[k - 1][1])
        return out.verdicts[k].ok

    if passes(len(chain)):
        out.landed, out.landed_verdict = chain, out.verdicts[len(chain)]
        return out
    if width > 1:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="lonca-prefix") as pool:
            def many(points: list[int]) -> dict[int, bool]:
                futures = {k: pool.submit(verify, [c for c, _ in chain[:k]], chain[k - 1][1]) for k in points}
                for k, f in futures.items():
                    out.verdicts[k] = f.result()
                return {k: out.verdicts[k].ok for k in points}
            culprit = find_culprit_wide(len(chain), many, width)
    else:
        culprit = find_culprit(len(chain), passes)
    out.landed = chain[:culprit]
    out.landed_verdict = out.verdicts[culprit] if culprit else None
    out.rejected = [(chain[culprit][0], out.verdicts[culprit + 1])]
    out.requeued = [c for c, _ in chain[culprit + 1:]]
    return out
