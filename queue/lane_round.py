"""A round of the queue over independent lanes: verified in parallel, landing only checked trees.

The window (up to batch_size queued changes) is cut into lanes (lanes.py), each built on trunk
as its own candidate, and all of them together as the union (lane after lane). With `runners`
checks at once, the union is verified beside the lanes in `runners - 1` groups:

- the union passes: it lands whole, on the verdict of exactly its tree;
- it fails: a failing group is cut (in halves, or in as many parts as runners are free) until
  each failing lane stands alone (group testing, a wave of checks at a time), and each failing lane is bisected on its own prefixes, all at once.
  A culprit is rejected on the verdict of the tree that failed: trunk and its lane's prefix,
  only what it depends on. What passed (whole lanes, the good prefixes of failing ones) is then
  built into one tree and verified, and lands when it passes. When it does not (lanes that pass
  apart and fail together), the tree that passed alone (a group, a lane, a good prefix) holding
  the most changes lands. The rest goes back to the queue for the next round.
- under `speculate` (the default), the prefixes of a failing lane are bisected as many at once
  as runners are free, and beside each halving wave that leaves a runner free the whole lanes
  passed so far are checked as one tree: when it passes it lands as that wave ends, a wave
  sooner, and what passed in that wave goes back to the queue.

`run_screened` is the other round of `[queue] rounds` (the default under `speculate`): one wave a
round, fresh lanes screened in groups sized by the failure rate, what a wave cleared landing as
one tree in the next (docs/decisions.md, "Screened rounds").

No tree lands on another tree's verdict: a lane that passed on trunk says nothing of trunk plus
another lane (docs/decisions.md, "Independent lanes, flaky retries, priority…"). Speculation
costs runners, never a check of the landed tree. With one lane, or one runner, the round is
`run_batch`, whose bisection verifies up to `runners` prefixes at once.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pygit2

from lonca.symbols import SymbolCache

from .batching import (BatchOutcome, Merges, QueuedChange, Verdict, find_culprit, find_culprit_wide, integrate_chain,
                       run_batch)
from .lanes import Footprint, partition

Chain = list[tuple[QueuedChange, str]]          # (change, its commit on the candidate)
Verify = Callable[[list[QueuedChange], str], Verdict]


@dataclass
class _Lane:
    changes: list[QueuedChange]
    make: Callable[[list[QueuedChange]], Chain]     # its changes integrated on trunk
    tip: Verdict | None = None
    good: int = 0                       # length of the longest prefix known to pass
    good_verdict: Verdict | None = None
    culprit: tuple[QueuedChange, Verdict] | None = None
    _chain: Chain | None = None

    @property
    def chain(self) -> Chain:
        """The lane alone on trunk, merged when first asked for: a round whose union passes, or
        whose groups find no culprit in it, never needs it."""
        if self._chain is None:
            self._chain = self.make(self.changes)
        return self._chain


def _bisect(lane: _Lane, verify: Verify, width: int = 1) -> None:
    """The lane's tip failed: find its culprit on the lane's own prefixes, `width` of them at once
    (on threads of their own: the round's pool is busy with the lanes' bisections)."""
    seen = {len(lane.chain): lane.tip}

    def check(k: int) -> Verdict:
        return verify([c for c, _ in lane.chain[:k]], lane.chain[k - 1][1])

    def passes(k: int) -> bool:
        if k not in seen:
            seen[k] = check(k)
        return bool(seen[k] and seen[k].ok)
    if width > 1:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="lonca-prefix") as pool:
            def many(points: list[int]) -> dict[int, bool]:
                futures = {k: pool.submit(check, k) for k in points if k not in seen}
                seen.update((k, f.result()) for k, f in futures.items())
                return {k: passes(k) for k in points}
            at = find_culprit_wide(len(lane.chain), many, width)
    else:
        at = find_culprit(len(lane.chain), passes)
    verdict = seen[at + 1]
    assert verdict is not None
    lane.culprit = (lane.chain[at][0], verdict)
    lane.good, lane.good_verdict = at, seen.get(at)


def split_even(items: list, parts: int) -> list[list]:
    """`items` in at most `parts` contiguous groups, as even as can be."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for k in range(parts):
        n = size + (k < extra)
        out.append(items[at:at + n])
        at += n
    return out


def run_lanes(repo: pygit2.Repository, trunk: str, changes: list[QueuedChange],
              prints: list[Footprint], verify: Verify, runners: int,
              committer: pygit2.Signature | None = None,
              cache: SymbolCache | None = None, speculate: bool = True,
              announce: Callable[[Chain], None] | None = None, groups: int | None = None) -> BatchOutcome:
    """One round over `changes` (queue order) whose footprints are `prints`. Commits are made on
    the calling thread; `verify(prefix, commit)` runs on up to `runners` threads at once, so it
    must open its own handle on the store. Creates commits only, never moves a ref. `speculate`
    False: a failing run is bisected one prefix at a time (lanes still verified in parallel).

    `announce` (under `speculate`; pipelining, called at most once, from the round's thread):
    told the chain this round lands if that chain's checks pass, as soon as it is known: after
    the first wave, the whole lanes that passed as one tree, whose check then starts (at once
    when it passed as such already). When it passes the round lands exactly it, so the caller may
    build the next round on its tip meanwhile; when it fails the round lands something else or
    nothing, and what was built on it is thrown away.

    `groups`: how many groups of lanes are checked beside the union in the first wave (default
    `runners - 1`); a round started beside one in flight takes fewer, leaving runners to the
    other round's second wave, so that neither waits a whole check time for a runner."""
    parts_first = runners - 1 if groups is None else max(1, min(groups, runners - 1))
    lane_groups = partition(prints)
    width = runners if speculate else 1
    if runners <= 1 or len(lane_groups) <= 1:
        return run_batch(repo, trunk, changes, verify, committer, cache, width=width)
    cache = cache if cache is not None else SymbolCache()
    out = BatchOutcome(trunk)
    # every candidate of the round is built on trunk from these merges: the union first (its
    # check starts before any other candidate is merged), then groups and lanes from its prefixes
    # (on a loaded machine, a round's merges cost as much as its checks' overhead)
    merges: Merges = {}
    union = integrate_chain(repo, trunk, [changes[i] for g in lane_groups for i in g], committer, cache, out, merges)
    conflicted = {c.change for c, _ in out.conflicted}
    rest = [c for c in changes if c.change not in conflicted]

    def integrated(order: list[QueuedChange]) -> Chain:
        return integrate_chain(repo, trunk, order, committer, cache, BatchOutcome(trunk), merges)

    lanes = [_Lane(kept, integrated) for g in lane_groups if (kept := [changes[i] for i in g if changes[i].change not in conflicted])]

    def build(part: list[_Lane]) -> Chain | None:
        """The lanes of `part` on trunk, lane after lane; None when they do not merge."""
        order = [c for lane in part for c in lane.changes]
        chain = integrated(order)
        return chain if len(chain) == len(order) else None

    if len(lanes) <= 1:
        # one lane left: one batch, as always (its merges are the union's)
        again = run_batch(repo, trunk, rest, verify, committer, cache, width=width, merges=merges)
        again.conflicted[:0] = out.conflicted
        return again

    passed: list[tuple[Chain, Verdict]] = []    # every tree that passed: what may land alone
    with ThreadPoolExecutor(max_workers=runners, thread_name_prefix="lonca-lane") as pool:
        def check(chain: Chain) -> Future:
            return pool.submit(verify, [c for c, _ in chain], chain[-1][1])

        # the union, and beside it the lanes in as many groups as there are runners left
        first = check(union)
        parts = split_even(lanes, parts_first)      # one part would be the union again
        wave: list[tuple[list[_Lane], Chain]] = []
        futures: list[Future] = []
        for part in parts if len(parts) > 1 else []:
            if (chain := build(part)) is not None:   # each checked as soon as it is built
                wave.append((part, chain))
                futures.append(check(chain))
        verdict = first.result()
        if verdict.ok:
            for f in futures:
                f.cancel()
            out.landed, out.landed_verdict = union, verdict
            return out
        # a group that fails is cut until each failing group is one lane (group testing)
        failing: list[list[_Lane]] = [] if wave else [lanes]
        early: list[tuple[Chain, Future]] = []  # the whole lanes passed so far as one tree (speculate)
        announced = False
        while wave or failing:
            for (part, chain), f in zip(wave, futures):
                v = f.result()
                if v.ok:
                    passed.append((chain, v))
                    for lane in part:
                        lane.good, lane.good_verdict = len(lane.changes), (v if len(part) == 1 else None)
                elif len(part) == 1:
                    part[0].tip = v
                else:
                    failing.append(part)
            whole = [lane for lane in lanes if lane.good == len(lane.changes)]
            if announce is not None and speculate and whole and not announced:
                # pipelining: the whole lanes passed so far are the tree this round lands (checked
                # before the cuts: the next round waits on it)
                announced = True
                ids = {c.change for lane in whole for c in lane.changes}
                known = next(((c, v) for c, v in passed if {q.change for q, _ in c} == ids), None)
                if known is not None:
                    done: Future = Future()
                    done.set_result(known[1])
                    early.append((known[0], done))
                    announce(known[0])
                elif (chain := build(whole)) is not None:
                    early.append((chain, check(chain)))
                    announce(chain)
            # each failing group cut in as many parts as the free runners allow (at least halves):
            # a wave fewer for every doubling of the parts (one runner kept for the early tree)
            free = runners - (1 if speculate else 0)
            cuts = max(2, free // max(1, len(failing)))
            wave = [(piece, chain) for part in failing for piece in split_even(part, cuts) if (chain := build(piece))]
            futures = [check(chain) for _, chain in wave]
            failing = []
            # beside a halving wave, on a runner it leaves free: what passed so far as one tree,
            # which can land when the wave ends instead of a wave later
            size = sum(len(lane.changes) for lane in whole)
            if announce is None and speculate and wave and len(wave) < runners and len(whole) > 1 \
                    and size > max([len(c) for c, _ in early] + [len(c) for c, _ in passed]):
                if (chain := build(whole)) is not None:
                    early.append((chain, check(chain)))
        tipped = [lane for lane in lanes if lane.tip is not None]
        for lane in tipped:     # merged here: the round's store handle is not shared with the pool's threads
            lane.chain
        each = max(1, width // max(1, len(tipped)))     # the free runners, shared by the lanes
        for f in [pool.submit(_bisect, lane, verify, each) for lane in tipped]:
            f.result()
        landable = [(chain, v) for chain, f in early if (v := f.result()).ok]
    passed += [(lane.chain[:lane.good], lane.good_verdict) for lane in lanes
               if lane.culprit and lane.good and lane.good_verdict]

    # what passed, lane by lane, checked once more as one tree: the usual end of a round with a
    # few culprits among many lanes (each of which passed alone). Under speculation, a tree of
    # whole lanes checked beside the last halving wave lands at once when it passed; the lanes
    # that passed after it (and the good prefixes of failing ones) go back to the queue.
    good = [lane for lane in lanes if lane.good]
    if landable:
        out.landed, out.landed_verdict = max(landable, key=lambda cv: len(cv[0]))
    elif len(good) > 1 and sum(lane.good for lane in good) < len(union):    # the whole union failed already
        order = [c for lane in good for c in lane.changes[:lane.good]]
        clean = integrated(order)
        if len(clean) == len(order):
            verdict = verify(order, clean[-1][1])
            if verdict.ok:
                out.landed, out.landed_verdict = clean, verdict
    if not out.landed and passed:   # they do not pass together: the biggest tree that passed alone
        out.landed, out.landed_verdict = max(passed, key=lambda cv: len(cv[0]))
    out.rejected = [lane.culprit for lane in lanes if lane.culprit]
    gone = {c.change for c, _ in out.landed} | {c.change for c, _ in out.rejected}
    out.requeued = [c for c in rest if c.change not in gone]
    return out


def group_size(p: float, most: int = 16) -> int:
    """Dorfman's group size for a failure rate `p`: the g that minimises the checks a change
    costs when a group of g is checked first and its lanes alone after it failed,
    1/g + 1 - (1 - p)^g (4 at p = 0.1, 3 at 0.2), against 1 for a change checked alone (above
    p = 0.31 or so)."""
    return min(range(1, most + 1), key=lambda g: 1.0 if g == 1 else 1 / g + 1 - (1 - p) ** g)


@dataclass
class Screening:
    """What the queue's last rounds said of changes still queued: a prediction that places them
    in the next round, never a verdict (no tree lands on it). `cleared`: held by a tree that
    passed; `suspect`: held by a failing group, to be checked alone."""
    cleared: set[str]
    suspect: set[str]


def run_screened(repo: pygit2.Repository, trunk: str, changes: list[QueuedChange], prints: list[Footprint],
                 verify: Verify, runners: int, batch: int, p: float, known: Screening,
                 committer: pygit2.Signature | None = None, cache: SymbolCache | None = None,
                 lane_most: int = 2) -> tuple[BatchOutcome, Screening]:
    """One wave of `runners` checks over the queue's first `changes`, each candidate built on
    trunk (docs/decisions.md, "Screened rounds"):

    - L: trunk + the cleared lanes (at most `batch` - g changes), which lands when it passes;
    - L + each group of the fresh lanes, in as many groups as runners are left, of at least two
      changes and at most g = group_size(p): a passing group is cleared, and lands when it is the
      biggest passing tree; a failing one's lanes are suspects;
    - each suspect lane's prefixes alone on trunk (a lane's first `lane_most` changes): the
      first failing prefix rejects its last change on that tree (trunk + only what it depends
      on), the prefixes before it are cleared.

    Lands the biggest passing tree of whole lanes, on the verdict of exactly that tree; the rest
    stays queued with what the wave said of it (the returned Screening). L failing (lanes that
    pass apart and fail together) makes its lanes suspects, each then landable alone."""
    cache = cache if cache is not None else SymbolCache()
    out = BatchOutcome(trunk)
    merges: Merges = {}
    g = max(1, group_size(p))
    lanes = [[changes[i] for i in lane][:lane_most] for lane in partition(prints)]
    cleared, suspect, fresh, room = [], [], [], max(1, batch - g)
    for lane in lanes:
        ids = {c.change for c in lane}
        if ids & known.suspect:
            suspect.append(lane)
        elif ids <= known.cleared and room:     # a lane's first changes when it does not fit
            cleared.append(lane[:room])
            room -= len(cleared[-1])
        else:
            fresh.append(lane)
    left = runners - bool(cleared) - bool(fresh)    # a runner kept for the fresh, if any
    taken_suspects = []
    for lane in suspect:    # cut to the runners left: a passing cut is whole, and lands
        if (cut := lane[:left]):
            taken_suspects.append(cut)
            left -= len(cut)
    budget, taken, n = runners - bool(cleared) - sum(map(len, taken_suspects)), [], 0
    for lane in fresh:
        if n >= budget * g:
            break
        taken.append(lane)
        n += len(lane)
    # as many groups as runners are left, of at least two changes (or g) and at most g: a runner
    # the wave leaves idle is a check nobody gains by, and a smaller group that fails holds fewer
    # innocents, each a wave later; a group of one on L would cost a check for one change
    groups = split_even(taken, min(budget, -(-n // min(2, g)))) if n and budget > 0 else []

    def chain_of(tip: str, order: list[QueuedChange]) -> Chain:
        return integrate_chain(repo, tip, order, committer, cache, out, merges)

    base = chain_of(trunk, [c for lane in cleared for c in lane])
    tip = base[-1][1] if base else trunk
    # (kind, chain, lanes, future): L, a group on L, a suspect lane's prefix on trunk
    cands: list[tuple[str, Chain, list[list[QueuedChange]], Future]] = []
    with ThreadPoolExecutor(max_workers=runners, thread_name_prefix="lonca-screen") as pool:
        def check(kind: str, chain: Chain, part: list[list[QueuedChange]]) -> None:
            cands.append((kind, chain, part, pool.submit(verify, [c for c, _ in chain], chain[-1][1])))
        if base:
            check("L", base, cleared)
        for part in groups:
            if (more := chain_of(tip, [c for lane in part for c in lane])):
                check("group", base + more, part)
        for lane in taken_suspects:
            chain = chain_of(trunk, lane)
            for k in range(1, len(chain) + 1):
                check("suspect", chain[:k], [lane])
        verdicts = [f.result() for *_, f in cands]
    conflicted = {c.change for c, _ in out.conflicted}
    out.conflicted = list({c.change: (c, i) for c, i in out.conflicted}.values())
    whole = [(chain, v) for (kind, chain, part, _), v in zip(cands, verdicts)
             if v.ok and (kind != "suspect" or len(chain) == len([c for c in part[0] if c.change not in conflicted]))]
    if whole:
        out.landed, out.landed_verdict = max(whole, key=lambda cv: len(cv[0]))
    gone = {c.change for c, _ in out.landed} | conflicted
    now = Screening(set(known.cleared), set(known.suspect))
    culprit_found: set[int] = set()   # the suspect lanes (by id) whose culprit this wave found

    def mark(ids: list[str], into: set[str]) -> None:
        for cid in ids:
            now.cleared.discard(cid)
            now.suspect.discard(cid)
            if cid not in gone:
                into.add(cid)
    for (kind, chain, part, _), v in zip(cands, verdicts):
        ids = [c.change for c, _ in chain]
        if kind == "L":
            mark(ids, now.cleared if v.ok else now.suspect)
        elif kind == "group":
            mine = [c.change for lane in part for c in lane if c.change not in conflicted]
            if v.ok:
                mark(mine, now.cleared)
            elif not base and len(part) == 1 and len(part[0]) == 1:     # trunk + that change alone failed
                out.rejected.append((part[0][0], v))
            else:
                mark(mine, now.suspect)
        elif id(part[0]) not in culprit_found:     # a suspect lane's prefixes, shortest first
            if v.ok:
                mark(ids[-1:], now.cleared)
            else:
                culprit_found.add(id(part[0]))
                out.rejected.append((chain[-1][0], v))
                mark([c.change for c in part[0][len(chain):]], set())  # they met the culprit: fresh again
    gone |= {c.change for c, _ in out.rejected}
    now.cleared -= gone
    now.suspect -= gone
    out.requeued = [c for c in changes if c.change not in gone]
    return out, now
