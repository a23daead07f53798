"""A round of the queue over independent lanes: verified in parallel, landing only checked trees.

The window (up to batch_size queued changes) is cut into lanes (lanes.py). Each lane is built on
trunk as its own candidate, and all of them together as the union candidate (lane after lane).
With `runners` checks at once, the union and the lanes' tips are verified together:

- the union passes: it lands whole, on the verdict of exactly its tree;
- it fails: each lane that failed is bisected on its own candidates, all of them at once, and
  its culprit is rejected with the verdict of its failing prefix (as `run_batch` would, on a
  tree that holds only what that change depends on). Of the trees that passed (a lane's tip,
  or the good prefix of a failing lane), the one holding the most changes lands; everything
  else goes back to the queue for the next round, on the new trunk.

No tree lands on another tree's verdict: a lane that passed on trunk says nothing of trunk plus
another lane (docs/decisions.md, "Independent lanes"), so two lanes that passed apart land
together only when their union passed too, which is the round's first candidate. Speculation
costs runners, never a check of the landed tree.

With one lane, or one runner, the round is `run_batch` as it was.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pygit2

from lonca.symbols import SymbolCache

from .batching import BatchOutcome, QueuedChange, Verdict, find_culprit, run_batch
from .lanes import Footprint, partition
from .merge import integrate

Chain = list[tuple[QueuedChange, str]]          # (change, its commit on the candidate)
Verify = Callable[[list[QueuedChange], str], Verdict]


@dataclass
class _Lane:
    chain: Chain
    tip: Verdict | None = None
    good: int = 0                       # length of the longest prefix known to pass
    good_verdict: Verdict | None = None
    culprit: tuple[QueuedChange, Verdict] | None = None


def _chain(repo, trunk, changes, committer, cache, out: BatchOutcome) -> Chain:
    chain: Chain = []
    tip = trunk
    for ch in changes:
        integration = integrate(repo, tip, ch.commit, ch.base, ch.message, ch.author, committer, cache)
        if integration.commit is None:
            out.conflicted.append((ch, integration))
            continue
        chain.append((ch, integration.commit))
        tip = integration.commit
    return chain


def _bisect(lane: _Lane, verify: Verify) -> None:
    """The lane's tip failed: find its culprit on the lane's own prefixes."""
    seen = {len(lane.chain): lane.tip}

    def passes(k: int) -> bool:
        if k not in seen:
            seen[k] = verify([c for c, _ in lane.chain[:k]], lane.chain[k - 1][1])
        return bool(seen[k] and seen[k].ok)
    at = find_culprit(len(lane.chain), passes)
    verdict = seen[at + 1]
    assert verdict is not None
    lane.culprit = (lane.chain[at][0], verdict)
    lane.good, lane.good_verdict = at, seen.get(at)


def run_lanes(repo: pygit2.Repository, trunk: str, changes: list[QueuedChange],
              prints: list[Footprint], verify: Verify, runners: int,
              committer: pygit2.Signature | None = None,
              cache: SymbolCache | None = None) -> BatchOutcome:
    """One round over `changes` (queue order) whose footprints are `prints`. Commits are made on
    the calling thread; `verify(prefix, commit)` runs on up to `runners` threads at once, so it
    must open its own handle on the store. Creates commits only, never moves a ref."""
    groups = partition(prints)
    if runners <= 1 or len(groups) <= 1:
        return run_batch(repo, trunk, changes, verify, committer, cache)
    cache = cache if cache is not None else SymbolCache()
    out = BatchOutcome(trunk)
    lanes = [_Lane(_chain(repo, trunk, [changes[i] for i in g], committer, cache, out)) for g in groups]
    lanes = [lane for lane in lanes if lane.chain]
    conflicted = {c.change for c, _ in out.conflicted}
    rest = [c for c in changes if c.change not in conflicted]
    union_order = [c for lane in lanes for c, _ in lane.chain]
    union = _chain(repo, trunk, union_order, committer, cache, BatchOutcome(trunk))
    if len(lanes) <= 1 or len(union) != len(union_order):
        # one lane left, or lanes the facts called apart that do not merge: one batch, as always
        again = run_batch(repo, trunk, rest, verify, committer, cache)
        again.conflicted[:0] = out.conflicted
        return again

    with ThreadPoolExecutor(max_workers=runners, thread_name_prefix="lonca-lane") as pool:
        first = pool.submit(verify, [c for c, _ in union], union[-1][1])
        tips: list[Future] = [pool.submit(verify, [c for c, _ in lane.chain], lane.chain[-1][1]) for lane in lanes]
        verdict = first.result()
        if verdict.ok:
            for f in tips:
                f.cancel()
            out.landed, out.landed_verdict = union, verdict
            return out
        for lane, f in zip(lanes, tips):
            lane.tip = f.result()
            if lane.tip.ok:
                lane.good, lane.good_verdict = len(lane.chain), lane.tip
        for f in [pool.submit(_bisect, lane, verify) for lane in lanes if not lane.tip.ok]:
            f.result()

    best = max((lane for lane in lanes if lane.good), key=lambda lane: lane.good, default=None)
    if best is not None:
        out.landed, out.landed_verdict = best.chain[:best.good], best.good_verdict
    out.rejected = [lane.culprit for lane in lanes if lane.culprit]
    gone = {c.change for c, _ in out.landed} | {c.change for c, _ in out.rejected}
    out.requeued = [c for c in rest if c.change not in gone]
    return out
