"""A discrete-event simulation of the team queue's round policies (issue 15), not the worker.

`python -m bench.queue_sim` prints, for the team bench's workload (bench/queue_team.py: 256
changes, 70 % independent, 10 % failing, arrivals open-loop at runners / T), each policy's checks
per decided change, changes a minute and p95 queued -> integrated. It models what bounds the real
queue: a check holds its runner slot SLOT_S, a free slot goes to the older round first, a round's
candidates are merged on its thread one change at a time (MERGE_S a merge, merges shared by
candidates with a common prefix, as `integrate_chain` does) and each logged decision costs LOG_S.
The defaults (1.1 s, 3 ms, 10 ms) are the bench's at load 2-4: its trace (BENCH_QUEUE_TRACE=1)
shows waves 1.15-1.2 s apart for T = 1 s, a merge of the workload's changes takes 1-5 ms; at
load 10-15 a check held its slot 1.28 s (SIM_SLOT_S=1.28 SIM_MERGE_S=0.01 SIM_LOG_S=0.02). A tree fails exactly when it holds a failing change (the
bench's check). Policies:

- `main`: run_lanes and _drain as they are: the union beside runners - 1 groups (half the
  runners beside a round in flight), the whole lanes that passed announced and checked in the
  second wave, failing groups cut and bisected, two rounds in flight.
- `loo`: one wave a round: the union of the fresh lanes beside the union minus each group
  ("leave one out") and each suspect lane alone; the biggest passing tree of fresh lanes lands at
  the wave's end; the group a single culprit hides in comes back as suspects, each lane checked
  alone in the next round (a failing one of one change is rejected on that tree), its innocents
  back into the next union (measured, rejected: with 16 changes two culprits or more come in
  half the rounds, and then no tree of the wave passes).
- `wave`: run_screened as in queue/lane_round.py (screened rounds): one wave a round, L = trunk
  + the cleared lanes, L + each group of fresh lanes (as many groups as runners are left, of at
  least `least` changes and at most g from the observed failure rate, Dorfman; `fill=False`:
  ceil(n / g) groups, as before), each
  suspect lane's prefixes alone on trunk; the biggest passing tree lands. `stack=True` checks
  L + two groups or more on the runners still left (measured, no gain: not in the worker).
- `simulate_rolling`: no waves, a chain of links checked as runners free (measured, not in the
  worker; its docstring says what it does).
- `scoped`: scoped checks (issue 15's "tree the policy proves equivalent"): every check of a
  candidate is one scope's check on that scope's filtered tree, and a tree passes a scope when
  its filtered tree of the scope passed, whichever tree it was checked on. A screened wave in each
  scope at once (`scoped_round`), the runners counted a check a scope; `SCOPES` says how the
  bench's paths fall into scopes. `simulate_scoped_rolling`: the same rule without waves, one
  check in flight a scope, landing as it ends (a model only).

`python -m bench.queue_sim` prints the means over 32 shufflings of the workload (seeds
15-46; one run of this model is chaotic: a round that ends a little later takes a different
window). SIM_SLOT_S, SIM_MERGE_S, SIM_LOG_S set the costs, SIM_LOAD the arrival rate as a share
of the ideal (1, the bench's), SIM_TRACE=1 prints each decision.
"""
from __future__ import annotations

import heapq
import itertools
import os
from dataclasses import dataclass, field
from typing import Callable, Generator

from bench.queue_team import Change, workload
from bench.worker import pct
from lonca.queue.lane_round import group_size, split_even

SLOT_S = float(os.environ.get("SIM_SLOT_S", "1.1"))
MERGE_S = float(os.environ.get("SIM_MERGE_S", "0.003"))
LOG_S = float(os.environ.get("SIM_LOG_S", "0.01"))
TRACE = bool(os.environ.get("SIM_TRACE"))
# arrivals as a share of the ideal rate (runners / T); the bench's is 1. Below 1 the queue has
# slack, and the throughput it can show is at most this share of the ideal.
LOAD = float(os.environ.get("SIM_LOAD", "1"))


class Event:
    def __init__(self) -> None:
        self.done, self.value, self.waiters = False, None, []

    def fire(self, sim: "Sim", value=None) -> None:
        if self.done:
            return
        self.done, self.value = True, value
        for w in self.waiters:
            sim.soon(w)
        self.waiters = []


class Sim:
    """Processes are generators yielding an Event (resumed with its value), a float (a delay) or
    a list of Events (resumed with their values once all fired)."""

    def __init__(self, runners: int) -> None:
        self.now, self.seq = 0.0, itertools.count()
        self.events: list = []
        self.free = runners
        self.waiting: list = []     # (priority, seq, tree, event, cancelled)
        self.checks = 0

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.events, (t, next(self.seq), fn))

    def soon(self, fn: Callable[[], None]) -> None:
        self.at(self.now, fn)

    def spawn(self, gen: Generator) -> Event:
        done = Event()

        def step(value=None) -> None:
            try:
                got = gen.send(value)
            except StopIteration as stop:
                done.fire(self, stop.value)
                return
            if isinstance(got, (int, float)):
                self.at(self.now + got, step)
            elif isinstance(got, Event):
                if got.done:
                    self.soon(lambda: step(got.value))
                else:
                    got.waiters.append(lambda: step(got.value))
            else:
                events = list(got)
                left = [sum(not e.done for e in events)]
                if not left[0]:
                    self.soon(lambda: step([e.value for e in events]))

                def one() -> None:
                    left[0] -= 1
                    if not left[0]:
                        step([e.value for e in events])
                for e in events:
                    if not e.done:
                        e.waiters.append(one)
        self.soon(lambda: step(None))
        return done

    def check(self, priority: int, fails: bool, cancelled: Callable[[], bool]) -> Event:
        ev = Event()
        heapq.heappush(self.waiting, (priority, next(self.seq), fails, ev, cancelled))
        self.soon(self._dispatch)
        return ev

    def _dispatch(self) -> None:
        while self.free and self.waiting:
            _, _, fails, ev, cancelled = heapq.heappop(self.waiting)
            if cancelled():
                ev.fire(self, False)
                continue
            self.free -= 1
            self.checks += 1

            def end(ev=ev, fails=fails) -> None:
                self.free += 1
                ev.fire(self, not fails)
                self._dispatch()
            self.at(self.now + SLOT_S, end)

    def run(self) -> None:
        while self.events:
            self.now, _, fn = heapq.heappop(self.events)
            fn()


@dataclass
class Outcome:
    landed: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    suspects: list[list[int]] = field(default_factory=list)   # lanes to check alone next round


class Round:
    """A round's thread: its merges (memo of chains built on its base) and its checks."""

    def __init__(self, sim: Sim, q: "Queue", base: frozenset, window: list[int], order_no: int) -> None:
        self.sim, self.q, self.base, self.window, self.order_no = sim, q, base, window, order_no
        self.built: set[tuple[int, ...]] = set()
        self.cancelled = False
        self.announced = Event()
        self.landing: set[int] = set()

    def build(self, chain: list[int]) -> float:
        """The merges `chain` costs on this round's thread (its prefixes built already are free)."""
        k = len(chain)
        while k and tuple(chain[:k]) not in self.built:
            k -= 1
        for j in range(k + 1, len(chain) + 1):
            self.built.add(tuple(chain[:j]))
        return (len(chain) - k) * MERGE_S

    def check(self, chain: list[int]) -> Event:
        return self.sim.check(self.order_no, any(self.q.changes[i].failing for i in chain), lambda: self.cancelled)

    def announce(self, chain: list[int]) -> None:
        self.landing = set(chain)
        self.announced.fire(self.sim, frozenset(chain))


def _culprit_wide(rnd: Round, chain: list[int], width: int, seen: dict[int, bool]) -> Generator:
    """find_culprit_wide over the chain's prefixes (prefix len(chain) known failing)."""
    good, bad = 0, len(chain)
    while bad - good > 1:
        span = bad - good
        points = sorted({good + span * i // (width + 1) for i in range(1, width + 1)} - {good, bad})
        todo = [k for k in points if k not in seen]
        evs = []
        for k in todo:
            yield rnd.build(chain[:k])
            evs.append(rnd.check(chain[:k]))
        if evs:
            for k, v in zip(todo, (yield evs)):
                seen[k] = v
        first_bad = min((p for p in points if not seen[p]), default=bad)
        good = max([good] + [p for p in points if seen[p] and p < first_bad])
        bad = first_bad
    return bad - 1


def _batch(rnd: Round, chain: list[int], width: int) -> Generator:
    out = Outcome()
    yield rnd.build(chain)
    seen = {len(chain): (yield rnd.check(chain))}
    if seen[len(chain)]:
        out.landed = chain
        return out
    at = yield from _culprit_wide(rnd, chain, width, seen)
    out.landed, out.rejected = chain[:at], [chain[at]]
    return out


def main_round(rnd: Round, lanes: list[list[int]], runners: int, groups: int | None, pipelined: bool) -> Generator:
    """run_lanes (speculate, announce when pipelined) as in queue/lane_round.py."""
    union = [i for lane in lanes for i in lane]
    if len(lanes) <= 1:
        return (yield from _batch(rnd, union, runners))
    parts_first = runners - 1 if groups is None else max(1, min(groups, runners - 1))
    yield rnd.build(union)
    first = rnd.check(union)
    parts = split_even(lanes, parts_first)
    wave: list[tuple[list[list[int]], list[int], Event]] = []
    for part in parts if len(parts) > 1 else []:
        chain = [i for lane in part for i in lane]
        yield rnd.build(chain)
        wave.append((part, chain, rnd.check(chain)))
    out = Outcome()
    if (yield first):
        out.landed = union
        return out
    good: dict[int, int] = {}       # lane index -> passing prefix length
    tip_failed: list[int] = []
    passed: list[list[int]] = []
    failing: list[list[list[int]]] = [] if wave else [lanes]
    early: list[tuple[list[int], Event | bool]] = []
    announced = False
    index = {tuple(lane): k for k, lane in enumerate(lanes)}
    while wave or failing:
        results = (yield [ev for _, _, ev in wave]) if wave else []
        for (part, chain, _), ok in zip(wave, results):
            if ok:
                passed.append(chain)
                for lane in part:
                    good[index[tuple(lane)]] = len(lane)
            elif len(part) == 1:
                tip_failed.append(index[tuple(part[0])])
            else:
                failing.append(part)
        whole = [lane for k, lane in enumerate(lanes) if good.get(k) == len(lane)]
        if pipelined and whole and not announced:
            announced = True
            ids = [i for lane in whole for i in lane]
            if any(set(c) == set(ids) for c in passed):
                early.append((ids, True))
            else:
                yield rnd.build(ids)
                early.append((ids, rnd.check(ids)))
            rnd.announce(ids)
        cuts = max(2, (runners - 1) // max(1, len(failing)))
        wave = []
        for part in failing:
            for piece in split_even(part, cuts):
                chain = [i for lane in piece for i in lane]
                yield rnd.build(chain)
                wave.append((piece, chain, rnd.check(chain)))
        failing = []
    each = max(1, runners // max(1, len(tip_failed)))
    culprits: dict[int, int] = {}

    def bisect(k: int) -> Generator:
        lane = lanes[k]
        yield rnd.build(lane)
        at = yield from _culprit_wide(rnd, lane, each, {len(lane): False})
        culprits[k], good[k] = lane[at], at
        if at:
            passed.append(lane[:at])
    yield [rnd.sim.spawn(bisect(k)) for k in tip_failed]
    landable = []
    for chain, ev in early:
        ok = ev if isinstance(ev, bool) else (yield ev)
        if ok:
            landable.append(chain)
    goods = [k for k in range(len(lanes)) if good.get(k)]
    if landable:
        out.landed = max(landable, key=len)
    elif len(goods) > 1 and sum(good[k] for k in goods) < len(union):
        order = [i for k in goods for i in lanes[k][:good[k]]]
        yield rnd.build(order)
        if (yield rnd.check(order)):
            out.landed = order
    if not out.landed and passed:
        out.landed = max(passed, key=len)
    out.rejected = list(culprits.values())
    return out


def loo_round(rnd: Round, lanes: list[list[int]], suspects: list[list[int]], runners: int, parts: int) -> Generator:
    """One wave: the fresh lanes' union, the union minus each of `parts` groups, each suspect lane
    alone; a failing suspect lane is bisected (more waves) when it holds more than one change."""
    out = Outcome()
    union = [i for lane in lanes for i in lane]
    groups = split_even(lanes, parts) if lanes else []
    trees: list[list[int]] = []
    if union:
        trees.append(union)
    if len(groups) > 1:
        for k in range(len(groups)):
            trees.append([i for j, g in enumerate(groups) if j != k for lane in g for i in lane])
    evs = []
    for t in trees:
        yield rnd.build(t)
        evs.append(rnd.check(t))
    sevs = []
    for lane in suspects:
        yield rnd.build(lane)
        sevs.append(rnd.check(lane))
    res = (yield evs) if evs else []
    sres = (yield sevs) if sevs else []
    if res and res[0]:
        out.landed = union
    elif len(groups) > 1:
        hit = [k for k in range(len(groups)) if res[1 + k]]
        if hit:
            out.landed = trees[1 + hit[0]]
            out.suspects += [lane for lane in groups[hit[0]]]
        else:       # two groups or more hold culprits: each group comes back alone
            out.suspects += [[i for lane in g for i in lane] for g in groups]
    elif union:
        out.suspects += lanes
    cleared = []
    for lane, ok in zip(suspects, sres):
        if ok:
            cleared.append(lane)
        elif len(lane) == 1:
            out.rejected.append(lane[0])
        else:
            at = yield from _culprit_wide(rnd, lane, runners, {len(lane): False})
            out.rejected.append(lane[at])
            cleared.append(lane[:at])   # good prefix: back to the queue
    rnd.q.cleared.update(i for lane in cleared for i in lane)
    return out


def wave_round(rnd: Round, cleared: list[list[int]], suspects: list[list[int]], groups: list[list[list[int]]],
               runners: int, spec_all: bool, stack: bool = False) -> Generator:
    """One wave on trunk T: L = T + the cleared lanes (lands when it passes), L + each fresh group
    (a passing one is cleared, or lands when it is the biggest passing tree), optionally L + every
    fresh group, and each suspect lane alone on T (a failing one of one change is rejected on that
    tree, a longer one bisected; a passing one is cleared)."""
    out = Outcome()
    base = [i for lane in cleared for i in lane]
    cands: list[tuple[str, list[int], list[list[int]]]] = []
    if base:
        cands.append(("L", base, []))
    if spec_all and len(groups) > 1:
        cands.append(("all", base + [i for g in groups for lane in g for i in lane], []))
    for g in groups:
        cands.append(("g", base + [i for lane in g for i in lane], g))
    for lane in suspects:       # every prefix of the lane alone on T: the first failing one rejects
        for k in range(1, len(lane) + 1):
            cands.append(("s", lane[:k], [lane]))
    if stack:       # the runners left: L + two groups or more, the likeliest to land most first
        sets = [c for r in range(2, len(groups) + 1) for c in itertools.combinations(groups, r)]
        sizes = {id(c): sum(len(lane) for g in c for lane in g) for c in sets}
        sets.sort(key=lambda c: -sizes[id(c)] * 0.9 ** sizes[id(c)])
        for c in sets[:max(0, runners - len(cands))]:
            cands.append(("stack", base + [i for g in c for lane in g for i in lane], []))
    evs = []
    for _, chain, _ in cands:
        yield rnd.build(chain)
        evs.append(rnd.check(chain))
    res = (yield evs) if evs else []
    landable = [chain for (kind, chain, _), ok in zip(cands, res) if ok and kind != "s"]
    if landable:
        out.landed = max(landable, key=len)
    landed = set(out.landed)
    first_bad: dict[int, int] = {}
    for (kind, chain, lanes), ok in zip(cands, res):
        if kind == "s":
            key = id(lanes[0])
            if not ok and key not in first_bad:
                first_bad[key] = len(chain) - 1
                out.rejected.append(chain[-1])
            if ok and key not in first_bad:
                rnd.q.cleared.add(chain[-1])
            continue
        if kind != "g":
            continue
        if ok:
            rnd.q.cleared.update(i for lane in lanes for i in lane if i not in landed)
        elif not base and len(lanes) == 1 and len(lanes[0]) == 1:
            out.rejected.append(lanes[0][0])
        else:
            out.suspects += lanes
    return out


def scoped_round(rnd: Round, waves: list[tuple[list[list[int]], list[list[int]], list[list[list[int]]]]],
                 runners: int) -> Generator:
    """Scoped checks: one screened wave in each scope, each candidate a check of that scope's
    filtered tree only (trunk's files of the scope + the candidate's changes: a lane is one path,
    so one scope). What lands is the union of each scope's biggest passing tree: the landed
    tree's filtered tree of every scope is one that passed (a scope nothing landed in is trunk's,
    which passed), so no check of the combined tree. Within one scope the rule stays exact: two
    passing groups of a scope are two filtered trees, one lands, the other is cleared for the
    next wave's L of that scope."""
    outs = yield [rnd.sim.spawn(wave_round(rnd, cl, su, groups, runners, False)) for cl, su, groups in waves]
    out = Outcome()
    for o in outs:
        out.landed += o.landed
        out.rejected += o.rejected
        out.suspects += o.suspects
    return out


# How a check's paths cut the bench's tree (bench/scale_repo.py's pkgNNN/subNN/mI.py and the
# shared hot/hK.py): one check of the whole tree (today's rule, the control), one scoped check
# per top-level folder (the brief's setting: pkg000 and hot at 256 changes), per folder holding
# the modules (pkg000/sub00-02, filled in arrival order, and hot), per file (every module its own
# check: the finest a policy can say), or a layout the bench does not have: the independent
# modules in 8 scopes by their number mod 8, each shared module its own.
SCOPES: dict[str, Callable[[str], str]] = {
    "whole": lambda path: "",
    "top": lambda path: path.split("/", 1)[0],
    "folder": lambda path: path.rsplit("/", 1)[0],
    "file": lambda path: path,
    "mod8": lambda path: path if path.startswith("hot/") else f"m{int(path.rsplit('m', 1)[1][:-3]) % 8}",
}


class Queue:
    def __init__(self, changes: list[Change]) -> None:
        self.changes = changes
        self.key = {c.index: (c.path if c.path.startswith("hot/") else f"own{c.index}") for c in changes}
        self.queued: list[int] = []
        self.verifying: set[int] = set()
        self.trunk: frozenset = frozenset()
        self.decided: dict[int, float] = {}
        self.rejected: set[int] = set()
        self.suspect: dict[int, int] = {}       # change -> its suspect group's id
        self.cleared: set[int] = set()
        self.wake = Event()

    def lanes(self, window: list[int]) -> list[list[int]]:
        out: dict[str, list[int]] = {}
        for i in window:
            out.setdefault(self.key[i], []).append(i)
        return list(out.values())


def simulate(changes: list[Change], runners: int, t: float, policy: str, batch: int = 16,
             parts: int | None = None, size: int = 0, spec_all: bool = False, m: int = 2,
             fill: bool = True, stack: bool = False, least: int = 2, scopes: str = "whole") -> dict:
    sim, q = Sim(runners), Queue(changes)
    orders = itertools.count(1)
    arrive = arrival_times(changes, runners, t)
    for c in changes:
        def come(i=c.index) -> None:
            q.queued.append(i)
            q.wake.fire(sim)
        sim.at(arrive[c.index], come)
    pipelined = policy == "main" and runners > 1
    scope = SCOPES[scopes]

    def start(base: frozenset, ahead: Round | None) -> tuple[Round, Event] | None:
        order = [i for i in q.queued if i not in q.verifying]
        if ahead is not None:
            held = {q.key[i] for i in ahead.window if i not in ahead.landing}
            order = [i for i in order if q.key[i] not in held or held.add(q.key[i])]  # type: ignore[func-returns-value]
        if policy == "scoped":
            g = size or group_size((len(q.rejected) + 1) / (len(q.decided) + 10))
            # scoped: each scope's own L, suspects' prefixes and groups, every one a check of
            # that scope's filtered tree, so the runners are counted a check a scope: fresh lanes
            # in queue order join their scope's open group (at most g changes) or open one while
            # a runner is left; a group never spans two scopes (that would be two checks anyway)
            lanes = [ln[:m] for ln in q.lanes(order)]
            of = lambda ln: scope(q.changes[ln[0]].path)  # noqa: E731
            waves: dict[str, tuple[list, list, list]] = {}
            free = runners
            for ln in lanes:
                if any(i in q.suspect for i in ln):
                    if (cut := ln[:free]):
                        waves.setdefault(of(ln), ([], [], []))[1].append(cut)
                        free -= len(cut)
                elif all(i in q.cleared for i in ln):
                    w = waves.setdefault(of(ln), ([], [], []))
                    if not w[0] and free:
                        free -= 1
                        w[0].append(ln)
                    elif w[0]:
                        w[0].append(ln)
            for ln in lanes:
                if any(i in q.suspect for i in ln) or all(i in q.cleared for i in ln):
                    continue
                groups = waves.setdefault(of(ln), ([], [], []))[2]
                if groups and sum(map(len, groups[-1])) + len(ln) <= g:
                    groups[-1].append(ln)
                elif free > 0:
                    groups.append([ln])
                    free -= 1
            while free > 0:     # groups on every free runner: the biggest group of a scope halved
                groups = max((gs for _, _, gs in waves.values()), key=lambda gs: max(map(len, gs), default=0))
                big = max(groups, key=len, default=[])
                if sum(map(len, big)) < 2 * min(least, g) or len(big) < 2:
                    break
                groups.remove(big)
                groups += split_even(big, 2)
                free -= 1
            window = [i for cl, su, gs in waves.values() for ln in cl + su + [x for gr in gs for x in gr] for i in ln]
            if not window:
                return None
            rnd = Round(sim, q, base, window, next(orders))
            q.verifying.update(window)
            return rnd, sim.spawn(scoped_round(rnd, list(waves.values()), runners))
        if policy == "wave":      # as run_screened in queue/lane_round.py
            g = size or group_size((len(q.rejected) + 1) / (len(q.decided) + 10))
            lanes = [ln[:m] for ln in q.lanes(order)]
            cl, room = [], max(1, (batch or 16) - g)
            for ln in lanes:
                if all(i in q.cleared for i in ln) and room and not any(i in q.suspect for i in ln):
                    cl.append(ln[:room])
                    room -= len(cl[-1])
            fr = [ln for ln in lanes if not all(i in q.cleared for i in ln) and not any(i in q.suspect for i in ln)]
            su, left = [], runners - bool(cl) - bool(fr)
            for ln in lanes:
                if any(i in q.suspect for i in ln) and (cut := ln[:left]):
                    su.append(cut)
                    left -= len(cut)
            budget = max(0, runners - bool(cl) - sum(map(len, su)) - spec_all)
            taken, n = [], 0
            for ln in fr:
                if n >= budget * g:
                    break
                taken.append(ln)
                n += len(ln)
            k = (min(budget, -(-n // min(least, g))) if fill else min(budget, -(-n // g))) if n else 0
            window = [i for ln in cl + su + taken for i in ln]
            if not window:
                return None
            rnd = Round(sim, q, base, window, next(orders))
            q.verifying.update(window)
            return rnd, sim.spawn(wave_round(rnd, cl, su, split_even(taken, k) if k else [], runners, spec_all,
                                                   stack))
        window = order[:batch]
        if not window:
            return None
        rnd = Round(sim, q, base, window, next(orders))
        q.verifying.update(window)
        if policy == "main":
            groups = max(2, runners // 2 - 1) if ahead is not None else None
            gen = main_round(rnd, q.lanes(window), runners, groups, pipelined and True)
        else:
            sus: dict[int, list[int]] = {}
            fresh = []
            for i in window:
                if i in q.suspect:
                    sus.setdefault(q.suspect[i], []).append(i)
                else:
                    fresh.append(i)
            gen = loo_round(rnd, q.lanes(fresh), list(sus.values()), runners,
                            parts or max(2, runners - 1 - len(sus)))
        return rnd, sim.spawn(gen)

    group_ids = itertools.count()

    def settle(rnd: Round, out: Outcome) -> Generator:
        q.verifying.difference_update(rnd.window)
        if out.landed:
            yield LOG_S
            q.trunk = q.trunk | frozenset(out.landed)
            for i in out.landed:
                q.decided[i] = sim.now
            if TRACE:
                print(f"  {sim.now:7.2f} landed {len(out.landed):2d} rejected {len(out.rejected)} queued {len(q.queued)}")
        for i in out.rejected:
            yield LOG_S
            q.decided[i] = sim.now
            q.rejected.add(i)
        for i in rnd.window:
            q.suspect.pop(i, None)
        q.cleared -= set(out.landed) | set(out.rejected)
        for lane in out.suspects:
            g = next(group_ids)
            for i in lane:
                if i not in q.decided:
                    q.suspect[i] = g
        q.queued = [i for i in q.queued if i not in q.decided]

    def drain() -> Generator:
        while len(q.decided) < len(changes):
            if not [i for i in q.queued if i not in q.verifying]:
                q.wake = Event()
                yield q.wake
                continue
            head = start(q.trunk, None)
            nxt = None
            while head is not None:
                rnd, done = head
                if pipelined:
                    ev = Event()
                    for e in (done, rnd.announced):
                        if e.done:
                            ev.fire(sim)
                        else:
                            e.waiters.append(lambda: ev.fire(sim))
                    yield ev
                    if rnd.announced.done and not done.done:
                        nxt = start(rnd.base | rnd.announced.value, rnd)
                out = yield done
                yield from settle(rnd, out)
                if nxt is not None and q.trunk != nxt[0].base:
                    nxt[0].cancelled = True
                    yield nxt[1]
                    q.verifying.difference_update(nxt[0].window)
                    nxt = None
                head, nxt = nxt, None
                if head is None and [i for i in q.queued if i not in q.verifying]:
                    head = start(q.trunk, None)
    sim.spawn(drain())
    sim.run()
    return _figures(policy, q.decided, q.rejected, arrive, sim.checks, q.rejected == {c.index for c in changes if c.failing})


@dataclass
class _Link:
    tree: frozenset             # the tree that lands when this link is first and its check passed
    lanes: list[list[int]]      # what the link adds to the one before it
    passed: bool | None = None  # None while its check runs


@dataclass
class _Probe:
    """A check in flight that is not (yet) a link: a screen of fresh lanes or a suspect's
    prefix, on the head it was built on."""
    kind: str                   # "screen" or "suspect"
    on: _Link                   # the head it was built on (trunk itself as a landed link)
    lanes: list[list[int]]


def simulate_rolling(changes: list[Change], runners: int, t: float, g: int = 0, wait_s: float = 0.3,
                     links: int = 1) -> dict:
    """Rolling screened checks (a model only): no waves. A chain of links T < H1 < H2 ..., each a
    tree landing when its own check passed and every link before it landed. As a runner frees,
    in this order: the cleared lanes as one new link on the head (checked); each suspect lane's
    prefix on the head; a group of up to g fresh lanes on the head (a partial group once its
    oldest change waited `wait_s`). A screen or a suspect that passes on the head still the head
    is appended as a link at once (its check is exactly that tree's); one whose head moved is
    cleared (a landing check later). A failing screen's lanes are suspects; a failing suspect
    prefix rejects its last change once trunk is the tree it was built on (trunk + that prefix).
    A link that fails drops itself and every link and probe after it, their lanes back to what
    they were."""
    sim = Sim(runners)
    arrive = arrival_times(changes, runners, t)
    failing = {c.index for c in changes if c.failing}
    key = {c.index: (c.path if c.path.startswith("hot/") else f"own{c.index}") for c in changes}
    lane_of: dict[str, list[int]] = {}
    for c in changes:
        lane_of.setdefault(key[c.index], []).append(c.index)
    trunk: set[int] = set()
    chain: list[_Link] = []
    fresh: list[int] = []           # arrived, never screened (in queue order)
    cleared: set[int] = set()
    suspect: set[int] = set()
    busy: set[int] = set()          # in a probe or a link in flight
    decided: dict[int, float] = {}
    rejected: set[int] = set()
    pending_reject: list[tuple[_Link, int]] = []
    free = [runners]
    builder = [0.0]                 # the round thread: merges one at a time
    logger = [0.0]
    checks = [0]
    heads = {frozenset()}           # every tree that was trunk

    def head() -> _Link:
        return chain[-1] if chain else _Link(frozenset(trunk), [], True)

    def ready(i: int, within: frozenset, taking: set[int]) -> bool:
        """Every change before i in its lane is in the tree or taken with it."""
        lane = lane_of[key[i]]
        return all(j in within or j in taking or j in rejected for j in lane[:lane.index(i)])

    def prefixes(pool: list[int], within: frozenset, most: int) -> list[list[int]]:
        """Lanes' next changes from `pool` (queue order), up to `most` changes a lane."""
        out: dict[str, list[int]] = {}
        taking: set[int] = set()
        for i in pool:
            if i in busy or i in decided or i in within:
                continue
            k = key[i]
            if len(out.get(k, [])) >= most or not ready(i, within, taking):
                continue
            out.setdefault(k, []).append(i)
            taking.add(i)
        return list(out.values())

    def start(members: list[int], on_base: frozenset, done: Callable[[bool], None]) -> None:
        free[0] -= 1
        checks[0] += 1
        new = [i for i in members if i not in on_base]
        builder[0] = max(builder[0], sim.now) + MERGE_S * len(new)
        ok = not any(i in failing for i in on_base | set(members))
        sim.at(builder[0] + SLOT_S, lambda: finish(ok, done))

    def finish(ok: bool, done: Callable[[bool], None]) -> None:
        free[0] += 1
        done(ok)
        settle()
        dispatch()

    def drop_after(link: _Link) -> None:
        k = chain.index(link)
        for gone in chain[k:]:
            for lane in gone.lanes:
                for i in lane:
                    busy.discard(i)
                    suspect.add(i)      # a failing link's lanes are checked alone next
        del chain[k:]

    def settle() -> None:
        while chain and chain[0].passed:
            link = chain.pop(0)
            logger[0] = max(logger[0], sim.now) + LOG_S
            for lane in link.lanes:
                for i in lane:
                    trunk.add(i)
                    decided[i] = logger[0]
                    busy.discard(i)
                    cleared.discard(i)
                    suspect.discard(i)
            heads.add(frozenset(trunk))
            reject_on_trunk()
        if chain and chain[0].passed is False:
            drop_after(chain[0])
        for on, i in list(pending_reject):      # its base will never be a trunk: checked again
            if on not in chain and on.tree not in heads:
                pending_reject.remove((on, i))
                busy.discard(i)
                suspect.add(i)

    def reject_on_trunk() -> None:
        """The pending rejections whose failing tree is a trunk + their prefix (now or before)."""
        for on, i in list(pending_reject):
            if on.tree in heads:
                pending_reject.remove((on, i))
                logger[0] = max(logger[0], sim.now) + LOG_S
                decided[i] = logger[0]
                rejected.add(i)
                busy.discard(i)
                suspect.discard(i)

    def probe_done(p: _Probe, ok: bool) -> None:
        ids = [i for lane in p.lanes for i in lane]
        alive = p.on in chain or p.on.tree in heads
        if not alive:       # built on a tree that is neither trunk nor in the chain
            for i in ids:
                busy.discard(i)
                if p.kind == "suspect" or not ok:
                    suspect.add(i)
                else:
                    cleared.add(i)
            return
        if ok:
            if (chain and chain[-1] is p.on) or (not chain and p.on.tree == frozenset(trunk)):
                chain.append(_Link(p.on.tree | frozenset(ids), p.lanes, True))   # checked as it is
                for i in ids:
                    suspect.discard(i)
            else:
                for i in ids:
                    busy.discard(i)
                    suspect.discard(i)
                    cleared.add(i)
            return
        if p.kind == "suspect" or len(ids) == 1:
            lane = p.lanes[0] if p.kind == "suspect" else ids
            for i in lane[:-1]:
                busy.discard(i)
                suspect.discard(i)
                cleared.add(i)
            pending_reject.append((p.on, lane[-1]))
            reject_on_trunk()
            return
        for i in ids:
            busy.discard(i)
            suspect.add(i)

    def dispatch() -> None:
        while free[0]:
            h = head()
            base = h.tree
            cl = [i for i in sorted(cleared) if i not in busy and ready(i, base, cleared)]
            if cl and sum(link.passed is None for link in chain) < links:
                lanes = prefixes(cl, base, 16)[:16]
                ids = [i for lane in lanes for i in lane][:16]
                if ids:
                    link = _Link(base | frozenset(ids), [[i] for i in ids])
                    busy.update(ids)
                    cleared.difference_update(ids)
                    chain.append(link)
                    start(ids, base, lambda ok, link=link: setattr(link, "passed", ok))
                    continue
            su = prefixes(sorted(suspect), base, 1)     # a suspect lane's next change alone
            if su:
                p = _Probe("suspect", h, [su[0]])
                busy.update(su[0])
                start(su[0], base, lambda ok, p=p: probe_done(p, ok))
                continue
            size = g or group_size((len(rejected) + 1) / (len(decided) + 10))
            fr = prefixes([i for i in fresh if i not in suspect and i not in cleared], base, 2)
            taken, n = [], 0
            for lane in fr:
                if n >= size:
                    break
                taken.append(lane)
                n += len(lane)
            oldest = min((arrive[i] for lane in taken for i in lane), default=sim.now)
            if not taken or (n < size and sim.now - oldest < wait_s - 1e-9):
                if taken:
                    sim.at(oldest + wait_s, dispatch)
                return
            ids = [i for lane in taken for i in lane]
            for i in ids:
                fresh.remove(i)
            busy.update(ids)
            p = _Probe("screen", h, taken)
            start(ids, base, lambda ok, p=p: probe_done(p, ok))

    _arrivals(sim, changes, arrive, fresh, dispatch)
    sim.run()
    return _figures("rolling", decided, rejected, arrive, checks[0], rejected == failing and len(decided) == len(changes))


def simulate_scoped_rolling(changes: list[Change], runners: int, t: float, scopes: str, g: int = 0) -> dict:
    """Scoped checks without waves (a model only): each scope has at most one check in flight,
    so the scope's filtered tree of trunk never moves under it, and a passing check lands the
    moment it ends (its filtered tree is exactly the one the landed tree has in that scope; the
    other scopes' are trunk's). A free runner goes to the scope whose oldest ready change waited
    longest: a suspect's change alone, else up to g of its fresh ready changes (lane prefixes) in
    one check. A failing check of one change rejects it (trunk's filtered tree + it failed); of
    more, its changes become suspects, each checked alone."""
    scope = SCOPES[scopes]
    arrive = arrival_times(changes, runners, t)
    failing = {c.index for c in changes if c.failing}
    key = {c.index: (c.path if c.path.startswith("hot/") else f"own{c.index}") for c in changes}
    of = {c.index: scope(c.path) for c in changes}
    lane_of: dict[str, list[int]] = {}
    for c in changes:
        lane_of.setdefault(key[c.index], []).append(c.index)
    sim = Sim(runners)
    queued: list[int] = []
    suspect: set[int] = set()
    busy: set[str] = set()
    trunk: set[int] = set()
    decided: dict[int, float] = {}
    rejected: set[int] = set()
    free, checks, logger = [runners], [0], [0.0]

    def ready(i: int, taking: list[int]) -> bool:
        lane = lane_of[key[i]]
        return all(j in trunk or j in rejected or j in taking for j in lane[:lane.index(i)])

    def candidate(s: str) -> list[int]:
        mine = [i for i in queued if of[i] == s]
        sus = [i for i in mine if i in suspect and ready(i, [])]
        if sus:
            return sus[:1]
        out: list[int] = []
        for i in mine:
            if i not in suspect and len(out) < (g or group_size((len(rejected) + 1) / (len(decided) + 10))) \
                    and ready(i, out):
                out.append(i)
        return out

    def dispatch() -> None:
        while free[0]:
            todo = [(arrive[c[0]], s, c) for s in dict.fromkeys(of[i] for i in queued) if s not in busy
                    and (c := candidate(s))]
            if not todo:
                return
            _, s, chain = min(todo)
            free[0] -= 1
            checks[0] += 1
            busy.add(s)
            ok = not any(i in failing for i in chain)
            sim.at(sim.now + MERGE_S * len(chain) + SLOT_S, lambda s=s, chain=chain, ok=ok: end(s, chain, ok))

    def end(s: str, chain: list[int], ok: bool) -> None:
        free[0] += 1
        busy.discard(s)
        if ok or len(chain) == 1:
            logger[0] = max(logger[0], sim.now) + LOG_S
            for i in chain:
                queued.remove(i)
                suspect.discard(i)
                decided[i] = logger[0]
                (trunk if ok else rejected).add(i)
        else:
            suspect.update(chain)
        dispatch()

    _arrivals(sim, changes, arrive, queued, dispatch)
    sim.run()
    return _figures("scoped-rolling", decided, rejected, arrive, checks[0],
                    rejected == failing and len(decided) == len(changes))


def arrival_times(changes: list[Change], runners: int, t: float) -> dict[int, float]:
    """Each change's arrival, open-loop at LOAD x runners / T a second, in queue order."""
    gap = t / runners / LOAD
    return {c.index: c.index * gap for c in changes}


def _arrivals(sim: Sim, changes: list[Change], arrive: dict[int, float], into: list[int], dispatch: Callable[[], None]) -> None:
    """Each change joins `into` at its arrival time, and the policy dispatches."""
    for c in changes:
        def come(i=c.index) -> None:
            into.append(i)
            dispatch()
        sim.at(arrive[c.index], come)


def _figures(policy: str, decided: dict[int, float], rejected: set[int], arrive: dict[int, float], checks: int,
             right: bool) -> dict:
    """A simulated run's row: changes a minute from the first arrival to the last decision, p95
    arrival -> landing of the landed ones, checks a decided change."""
    landed = [i for i in decided if i not in rejected]
    span = max(decided.values()) - min(arrive.values())
    return {"policy": policy, "per_min": len(decided) / span * 60, "p95": pct([decided[i] - arrive[i] for i in landed], 95),
            "checks": checks, "per_change": checks / max(1, len(decided)), "right": right}


def main() -> None:
    runners = int(os.environ.get("BENCH_QUEUE_RUNNERS", "8"))
    t = float(os.environ.get("BENCH_QUEUE_T", "1"))
    seeds = range(15, 47)       # the bench's workload is seed 15; the others shuffle it otherwise
    print(f"simulated: {runners} runners, T = {t:g} s, arrivals at {LOAD:g} x the ideal rate, slot {SLOT_S} s a check, merge {MERGE_S} s, log {LOG_S} s; "
          f"means over the workloads of seeds {seeds.start}-{seeds.stop - 1}")
    print(f"{'policy':<44} {'/min':>6} {'p95 s':>6} {'chk/ch':>6} ok")
    rows: list[tuple[str, Callable[[list[Change]], dict]]] = [
        ("main (pipelined lane rounds)", lambda w: simulate(w, runners, t, "main", 16)),
        ("leave-one-out rounds", lambda w: simulate(w, runners, t, "loo", 16))]
    rows += [(f"screened, g = {g}", lambda w, g=g: simulate(w, runners, t, "wave", 16, size=g, fill=False))
             for g in (2, 3, 5)]
    rows += [
        ("screened, g = Dorfman(p observed)", lambda w: simulate(w, runners, t, "wave", 16, fill=False)),
        ("screened + L with every group", lambda w: simulate(w, runners, t, "wave", 16, spec_all=True, fill=False)),
        ("screened, groups on every free runner, >= 1", lambda w: simulate(w, runners, t, "wave", 16, least=1)),
        ("screened, groups on every free runner, >= 2", lambda w: simulate(w, runners, t, "wave", 16)),
        ("screened, groups on every free runner, >= 3", lambda w: simulate(w, runners, t, "wave", 16, least=3)),
        ("  + stacked groups on the runners left", lambda w: simulate(w, runners, t, "wave", 16, stack=True)),
        *[(f"scoped checks, waves, {name}", lambda w, name=name: simulate(w, runners, t, "scoped", 16, scopes=name))
          for name in SCOPES],
        *[(f"scoped checks, rolling, {name}", lambda w, name=name: simulate_scoped_rolling(w, runners, t, name))
          for name in SCOPES],
        ("rolling, one link in flight, wait 0.3 s", lambda w: simulate_rolling(w, runners, t, 0, 0.3, 1)),
        ("rolling, two links, g = 3, no wait", lambda w: simulate_rolling(w, runners, t, 3, 0.0, 2))]
    for name, run in rows:
        rs = [run(workload(256, seed)) for seed in seeds]
        mean = lambda k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
        print(f"{name:<44} {mean('per_min'):6.0f} {mean('p95'):6.1f} {mean('per_change'):6.2f} "
              f"{'yes' if all(r['right'] for r in rs) else 'NO'}", flush=True)


if __name__ == "__main__":
    main()

