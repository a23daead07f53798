"""Independent lanes: the partition against a brute-force oracle, and rounds over real git trees
with real check processes, where only a tree whose checks passed ever lands."""
from __future__ import annotations

import sys
import threading
import time

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lonca.queue import (CheckSpec, Footprint, QueuedChange, Screening, Verdict, ahead, clear_of, depends, footprint, partition,
                         reasons, run_lanes, run_screened, verify_tree)

from queue_git import SIG, commit, files_of

# -- the partition --------------------------------------------------------------------------

PATHS = ["a.py", "b.py", "c#d.py", "lib/e.py", "lib/f.py"]
SYMBOLS = [f"{p}#{n}" for p in PATHS for n in ("f", "g")]


def oracle(prints: list[Footprint]) -> list[list[int]]:
    """Connected components by repeated reachability, each in queue order, by first member."""
    seen: set[int] = set()
    lanes = []
    for i in range(len(prints)):
        if i in seen:
            continue
        lane, todo = {i}, [i]
        while todo:
            k = todo.pop()
            for j in range(len(prints)):
                if j not in lane and depends(prints[k], prints[j]):
                    lane.add(j)
                    todo.append(j)
        seen |= lane
        lanes.append(sorted(lane))
    return lanes


prints_st = st.lists(st.builds(
    Footprint, st.frozensets(st.sampled_from(PATHS), max_size=2), st.frozensets(st.sampled_from(SYMBOLS), max_size=2),
    st.frozensets(st.sampled_from(SYMBOLS), max_size=1), st.integers(0, 15).map(lambda n: n == 0)),
    max_size=12)


@settings(max_examples=300, deadline=None)
@given(prints_st)
def test_partition_is_the_connected_components(prints):
    lanes = partition(prints)
    assert lanes == oracle(prints)
    # no change of one lane depends on one of another
    for x in range(len(lanes)):
        for y in range(x + 1, len(lanes)):
            assert not any(depends(prints[i], prints[j]) for i in lanes[x] for j in lanes[y])


@settings(max_examples=300, deadline=None)
@given(prints_st, st.data())
def test_priority_moves_ahead_only_past_independent_changes(prints, data):
    urgent = data.draw(st.sets(st.integers(0, max(0, len(prints) - 1)), max_size=3)) if prints else set()
    order = ahead(prints, urgent)
    assert sorted(order) == list(range(len(prints)))
    at = {i: n for n, i in enumerate(order)}
    # oracle: what moves is the urgent changes and, transitively, the earlier changes they depend on
    moved = set(urgent)
    grew = True
    while grew:
        more = {i for k in moved for i in range(k) if depends(prints[i], prints[k])} - moved
        grew, moved = bool(more), moved | more
    assert set(order[:len(moved)]) == moved
    assert order[:len(moved)] == sorted(moved) and order[len(moved):] == sorted(set(order) - moved)
    for i in range(len(prints)):
        for j in range(i + 1, len(prints)):
            if depends(prints[i], prints[j]):
                assert at[i] < at[j]         # dependent changes never swap


@settings(max_examples=300, deadline=None)
@given(prints_st, st.data())
def test_clear_of_leaves_out_what_reaches_a_held_change_through_earlier_ones(prints, data):
    held = data.draw(st.lists(st.sampled_from(prints), max_size=3)) if prints else []
    kept = clear_of(prints, held)
    assert kept == sorted(kept)

    # oracle: a change waits when a chain of dependencies, each step to an earlier change of the
    # queue, leads from it to a change that depends on a held one
    def waits(i: int, seen: frozenset = frozenset()) -> bool:
        if any(depends(prints[i], h) for h in held):
            return True
        return any(depends(prints[i], prints[j]) and waits(j, seen | {i}) for j in range(i) if j not in seen)
    assert kept == [i for i in range(len(prints)) if not waits(i)]
    out = set(range(len(prints))) - set(kept)
    for i in kept:      # what goes ahead never passes an earlier change it depends on
        assert not any(depends(prints[i], prints[j]) for j in out if j < i)
    assert clear_of(prints, []) == list(range(len(prints)))


def test_depends_reads_files_symbols_and_affected():
    a = footprint(["a.py"], {"edits": ["a.py#f"], "affected": ["b.py#caller"]})
    b = footprint(["b.py"], {"edits": ["b.py#other"]})
    c = footprint(["c.py"], {"adds": ["c.py#h"]})
    assert depends(a, b) and depends(b, a)          # a's affected names a symbol of b's file
    assert not depends(a, c) and not depends(b, c)
    assert depends(c, footprint(["c.py"], {}))      # no facts: depends on everything
    cut = footprint(["d.py"], {"affected": [], "affected_more": 3})
    assert depends(cut, c)                          # affected cut short: it may reach anything
    # a path that holds `#` is matched whole, never by its prefix
    hashy = footprint(["x#y.py"], {"edits": ["x#y.py#f"]})
    assert not depends(hashy, footprint(["x"], {"affected": ["x#z"]}))
    assert depends(hashy, footprint(["z.py"], {"affected": ["x#y.py#f"]}))
    assert partition([a, c, b, footprint(["e.py"], {"edits": ["e.py#k"]})]) == [[0, 2], [1], [3]]


# -- rounds on real trees -----------------------------------------------------------------------

PY = sys.executable
# fails when the candidate holds a file saying BAD, or both together.txt and apart.txt
CHECK = CheckSpec("tests", (PY, "-c", "import os, pathlib, sys\n"
                                      "bad = [p for p in pathlib.Path('.').rglob('*.txt') if 'BAD' in p.read_text()]\n"
                                      "sys.exit(1 if bad or (os.path.exists('together.txt') and os.path.exists('apart.txt')) else 0)"), 60)


def _repo(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    return repo, str(commit(repo, {"README": b"base\n"}, []))


def _change(repo, trunk, name, files):
    c = commit(repo, {**files_of(repo, trunk), **files}, [trunk], name)
    return QueuedChange(name, str(c), trunk, f"{name}\n", SIG), footprint(list(files), {"edits": [f"{p}#<file>" for p in files]})


class Checks:
    """verify(prefix, commit) with real check processes; records which commits were verified
    and each verdict, from whatever thread the round runs it on."""

    def __init__(self, tmp_path):
        self.root = tmp_path / "r.git"
        self.verdicts: dict[str, Verdict] = {}
        self.lock = threading.Lock()
        self.peak = self.running = 0
        self.started: dict[str, float] = {}     # candidate -> when its check started

    def __call__(self, prefix, candidate):
        repo = pygit2.Repository(str(self.root))        # this thread's own handle
        with self.lock:
            self.started.setdefault(candidate, time.monotonic())
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            results = verify_tree(repo, candidate, [CHECK])
        finally:
            with self.lock:
                self.running -= 1
        why = reasons(results, ["tests"])
        verdict = Verdict(not why, why, candidate)
        with self.lock:
            self.verdicts[candidate] = verdict
        return verdict


def _landed_on_its_own_verdict(repo, out, checks):
    """The round's invariant: what lands is a chain on trunk whose tip passed, exactly."""
    if not out.landed:
        return
    tip = out.landed[-1][1]
    assert out.landed_verdict is checks.verdicts[tip] and out.landed_verdict.ok
    parent = out.trunk_before
    for _, c in out.landed:
        assert [str(p) for p in repo[c].parent_ids] == [parent]
        parent = c


def test_independent_lanes_all_passing_land_as_their_union(tmp_path):
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"ok\n"}) for i in range(4)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=5)
    _landed_on_its_own_verdict(repo, out, checks)
    assert [c.change for c, _ in out.landed] == ["c0", "c1", "c2", "c3"]
    assert checks.peak >= 2          # the union and the lanes were verified at once
    assert {f"f{i}.txt" for i in range(4)} <= set(files_of(repo, out.trunk_after))


def test_failing_lanes_are_bisected_apart_and_only_a_checked_tree_lands(tmp_path):
    repo, trunk = _repo(tmp_path)
    made = [
        _change(repo, trunk, "a0", {"a.txt": b"one\n"}),
        _change(repo, trunk, "b0", {"b.txt": b"BAD\n"}),         # its own lane fails
        _change(repo, trunk, "a1", {"a.txt": b"one\n", "a2.txt": b"two\n"}),  # same file: a0's lane
        _change(repo, trunk, "c0", {"c.txt": b"fine\n"}),
        _change(repo, trunk, "d0", {"d.txt": b"BAD too\n"}),     # another failing lane
    ]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4)
    _landed_on_its_own_verdict(repo, out, checks)
    # both culprits found in one round, each on a tree of its own lane
    assert sorted(c.change for c, _ in out.rejected) == ["b0", "d0"]
    for c, verdict in out.rejected:
        assert verdict.reasons == ["verification_failed:tests"]
        assert set(files_of(repo, verdict.detail)) == {"README", f"{c.change[0]}.txt"}
    # what passed, the lane of a0 and a1 and that of c0, lands as one tree checked as such
    assert [c.change for c, _ in out.landed] == ["a0", "a1", "c0"] and out.requeued == []
    assert set(files_of(repo, out.trunk_after)) == {"README", "a.txt", "a2.txt", "c.txt"}


def test_lanes_that_pass_apart_but_fail_together_never_land_together(tmp_path):
    # the facts call them independent; their union fails: neither lane's pass vouches for it
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, "t", {"together.txt": b"x\n"}), _change(repo, trunk, "p", {"apart.txt": b"y\n"})]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=3)
    _landed_on_its_own_verdict(repo, out, checks)
    assert [c.change for c, _ in out.landed] == ["t"] and out.rejected == []
    assert [c.change for c in out.requeued] == ["p"]
    # next round: p alone on the new trunk fails, and is rejected on exactly that tree
    again = run_lanes(repo, out.trunk_after, out.requeued, [made[1][1]], checks, runners=3)
    assert again.landed == [] and [c.change for c, _ in again.rejected] == ["p"]
    assert set(files_of(repo, again.rejected[0][1].detail)) == {"README", "together.txt", "apart.txt"}


def test_few_runners_find_the_failing_lanes_by_halving(tmp_path):
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"BAD\n" if i in (2, 5) else b"ok\n"}) for i in range(7)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=2)
    _landed_on_its_own_verdict(repo, out, checks)
    assert sorted(c.change for c, _ in out.rejected) == ["c2", "c5"]
    assert [c.change for c, _ in out.landed] == ["c0", "c1", "c3", "c4", "c6"] and out.requeued == []
    assert checks.peak <= 2


def test_one_runner_is_the_batch_as_before(tmp_path):
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"ok\n"}) for i in range(3)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=1)
    assert len(checks.verdicts) == 1 and len(out.landed) == 3
    _landed_on_its_own_verdict(repo, out, checks)


@pytest.mark.parametrize("speculate", [True, False])
def test_speculation_lands_what_passed_a_wave_sooner_and_requeues_the_rest(tmp_path, speculate):
    # 4 runners: the union beside groups [c0 c1 c2] [c3 c4] [c5 c6]; c5 fails, so its group is
    # halved. Speculating, c0..c4 (the whole lanes passed so far) are checked beside the halves
    # and land as they end; c6, which passed in that wave, waits for the next round. Without,
    # what passed is checked once more as one tree after the halves, and all of it lands.
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"BAD\n" if i == 5 else b"ok\n"}) for i in range(7)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4, speculate=speculate)
    _landed_on_its_own_verdict(repo, out, checks)
    assert [c.change for c, _ in out.rejected] == ["c5"] and checks.peak <= 4
    if speculate:
        assert [c.change for c, _ in out.landed] == ["c0", "c1", "c2", "c3", "c4"]
        assert [c.change for c in out.requeued] == ["c6"]
    else:
        assert [c.change for c, _ in out.landed] == ["c0", "c1", "c2", "c3", "c4", "c6"] and out.requeued == []


@pytest.mark.parametrize("speculate", [True, False])
def test_a_failing_dependent_lane_is_bisected_with_or_without_speculation(tmp_path, speculate):
    # one lane of five changes (the third fails: their facts name one symbol) beside two others
    repo, trunk = _repo(tmp_path)
    made = [(_change(repo, trunk, f"d{i}", {f"dep{i}.txt": b"BAD\n" if i == 2 else b"ok\n"})[0],
             footprint([f"dep{i}.txt"], {"edits": ["dep.txt#shared"]})) for i in range(5)]
    made += [_change(repo, trunk, f"x{i}", {f"x{i}.txt": b"ok\n"}) for i in range(2)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4, speculate=speculate)
    _landed_on_its_own_verdict(repo, out, checks)
    assert [c.change for c, _ in out.rejected] == ["d2"] and checks.peak <= 4
    landed = {c.change for c, _ in out.landed}
    assert landed | {c.change for c in out.requeued} == {"d0", "d1", "d3", "d4", "x0", "x1"}
    assert not landed & {c.change for c in out.requeued}


def test_a_round_announces_what_it_lands_and_the_next_runs_on_it_meanwhile(tmp_path):
    # pipelining: 4 runners check the union beside [c0 c1 c2] [c3 c4] [c5 c6]; c5 fails, so the
    # first wave leaves the whole lanes c0..c4 passed; the round announces them as one tree, and
    # lands exactly that tree. A second round started on the
    # announced tip from the announcement runs its checks while the first round is still going.
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"BAD\n" if i == 5 else b"ok\n"}) for i in range(7)]
    later = [_change(repo, trunk, f"d{i}", {f"g{i}.txt": b"BAD\n" if i == 1 else b"ok\n"}) for i in range(3)]
    checks = Checks(tmp_path)
    told: list = []
    second: dict = {}

    def announce(chain):
        told.append(list(chain))
        tip = chain[-1][1]

        def next_round():
            store = pygit2.Repository(str(tmp_path / "r.git"))
            second["out"] = run_lanes(store, tip, [c for c, _ in later], [p for _, p in later], checks, runners=4)
        second["thread"] = threading.Thread(target=next_round)
        second["thread"].start()
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4, announce=announce)
    first_ended = time.monotonic()
    second["thread"].join()
    [chain] = told
    _landed_on_its_own_verdict(repo, out, checks)
    assert out.landed == chain and [c.change for c, _ in chain] == ["c0", "c1", "c2", "c3", "c4"]
    assert [c.change for c, _ in out.rejected] == ["c5"] and [c.change for c in out.requeued] == ["c6"]
    nxt = second["out"]
    assert nxt.trunk_before == out.trunk_after
    _landed_on_its_own_verdict(repo, nxt, checks)
    assert [c.change for c, _ in nxt.landed] == ["d0", "d2"] and [c.change for c, _ in nxt.rejected] == ["d1"]
    assert set(files_of(repo, nxt.trunk_after)) == {"README", *(f"f{i}.txt" for i in range(5)), "g0.txt", "g2.txt"}
    # the second round's first check started before the first round ended: they overlapped
    assert min(t for c, t in checks.started.items() if repo.descendant_of(c, out.trunk_after)) < first_ended


def test_an_announced_tree_that_fails_is_not_what_lands(tmp_path):
    # t and p pass apart and fail together: the tree announced after the first wave (t + p)
    # fails, so the round lands the biggest tree that passed alone; a round built on the
    # announced tip would be thrown away by the caller (trunk is not its base)
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, "t", {"together.txt": b"x\n"}), _change(repo, trunk, "p", {"apart.txt": b"y\n"}),
            _change(repo, trunk, "b", {"bad.txt": b"BAD\n"})]
    checks = Checks(tmp_path)
    told: list = []
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4, announce=told.append)
    _landed_on_its_own_verdict(repo, out, checks)
    [chain] = told
    assert [c.change for c, _ in chain] == ["t", "p"] and not checks.verdicts[chain[-1][1]].ok
    assert out.landed != chain and len(out.landed) == 1 and out.trunk_after != chain[-1][1]
    assert [c.change for c, _ in out.rejected] == ["b"]


def test_a_round_merges_each_prefix_once_and_checks_the_union_first(tmp_path, monkeypatch):
    # 6 lanes, 4 runners: the union beside groups [c0 c1] [c2 c3] [c4 c5]. The union is merged
    # first (6 merges) and checked before any group is merged; the first group is the union's
    # prefix (no merge), the others 2 each; no lane needs a chain of its own when all pass.
    import lonca.queue.batching as batching
    calls: list[str] = []
    real = batching.integrate

    def counted(repo, tip, commit, *rest, **kw):
        calls.append(tip)
        return real(repo, tip, commit, *rest, **kw)
    monkeypatch.setattr(batching, "integrate", counted)
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"ok\n"}) for i in range(6)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=4)
    _landed_on_its_own_verdict(repo, out, checks)
    assert len(out.landed) == 6 and len(calls) == 6 + 2 + 2
    assert min(checks.started, key=checks.started.get) == out.trunk_after     # the union's check came first


def test_a_round_beside_another_checks_fewer_groups_first(tmp_path):
    # a round started beside one in flight leaves runners to it: the union and 2 groups of its 7
    # lanes in the first wave (not 7 groups); c3 fails and is still found, the rest lands
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"BAD\n" if i == 3 else b"ok\n"}) for i in range(7)]
    checks = Checks(tmp_path)
    out = run_lanes(repo, trunk, [c for c, _ in made], [p for _, p in made], checks, runners=8, groups=2)
    _landed_on_its_own_verdict(repo, out, checks)
    assert [c.change for c, _ in out.rejected] == ["c3"]
    first_wave = sorted(checks.started, key=checks.started.get)[:3]
    assert {frozenset(files_of(repo, c)) - {"README"} for c in first_wave} == {
        frozenset(f"f{i}.txt" for i in range(7)), frozenset(f"f{i}.txt" for i in range(4)),
        frozenset(f"f{i}.txt" for i in range(4, 7))}
    assert {c.change for c, _ in out.landed} | {c.change for c in out.requeued} == {"c0", "c1", "c2", "c4", "c5", "c6"}


def _screened_wave(tmp_path, n, runners, p):
    """One screened wave over n fresh changes of their own files, all passing: the sizes of the
    trees it checked (changes beyond trunk) and what landed."""
    repo, trunk = _repo(tmp_path)
    made = [_change(repo, trunk, f"c{i}", {f"f{i}.txt": b"ok\n"}) for i in range(n)]
    verify, seen = _tree_verdict(tmp_path / "r.git")
    out, _ = run_screened(repo, trunk, [c for c, _ in made], [p for _, p in made], verify, runners, 16, p,
                          Screening(set(), set()))
    return sorted(len(files_of(repo, c)) - 1 for c in seen), out


@pytest.mark.parametrize("n, runners, p, sizes", [
    (10, 5, 0.1, [2, 2, 2, 2, 2]),  # g = 4, but five runners: five pairs, not 4 + 3 + 3
    (10, 3, 0.1, [3, 3, 4]),        # three runners: groups of at most g
    (3, 5, 0.1, [1, 2]),            # never a group of one beside a pair that could hold it
    (3, 5, 0.5, [1, 1, 1])])        # g = 1 at a failure rate of a half: each alone
def test_a_screened_wave_checks_as_many_groups_as_runners_are_left(tmp_path, n, runners, p, sizes):
    got, out = _screened_wave(tmp_path, n, runners, p)
    assert got == sizes
    assert len(out.landed) == max(sizes) and out.landed_verdict.ok    # the biggest passing tree


# -- screened rounds against an oracle --------------------------------------------------------

def _tree_verdict(root):
    """verify(prefix, commit) in Python over the candidate's real tree (no process: many rounds
    per example): fails on a file saying BAD, or on together.txt and apart.txt both there."""
    seen: dict[str, Verdict] = {}

    def verify(prefix, candidate):
        repo = pygit2.Repository(str(root))
        files = files_of(repo, candidate)
        bad = any(b"BAD" in data for data in files.values()) or {"together.txt", "apart.txt"} <= set(files)
        seen[candidate] = Verdict(not bad, ["verification_failed:tests"] if bad else [], candidate)
        return seen[candidate]
    return verify, seen


# each change: (its lane's file, failing); lane 0..3 are files several changes may share
screen_st = st.lists(st.tuples(st.sampled_from(["l0", "l1", "l2", "l3", "own", "own", "own", "pair"]),
                               st.integers(0, 9).map(lambda n: n == 0)), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None)
@given(screen_st, st.integers(2, 5), st.integers(2, 8))
def test_screened_rounds_land_each_passing_change_once_and_reject_each_failing_one_on_its_own_lane(
        tmp_path_factory, spec, runners, batch):
    tmp = tmp_path_factory.mktemp("screen")
    repo, trunk = _repo(tmp)
    base = trunk
    made, lane_of, failing, pair = [], {}, set(), []
    for i, (kind, bad) in enumerate(spec):
        name = f"c{i}"
        if kind == "pair" and len(pair) < 2:    # two changes that pass apart and fail together
            files = {["together.txt", "apart.txt"][len(pair)]: b"half\n"}
            pair.append(name)
            bad = False
        elif kind.startswith("l"):      # a lane: changes sharing a file (same bytes: they merge)
            files = {f"{kind}.txt": b"lane\n"}
        else:
            kind = f"own{i}"
            files = {}
        files[f"{name}.txt"] = f"{name} {'BAD' if bad else 'ok'}\n".encode()
        made.append(_change(repo, trunk, name, files))
        lane_of[name] = next(iter(files))
        if bad:
            failing.add(name)
    verify, seen = _tree_verdict(tmp / "r.git")
    queued = list(made)
    known = Screening(set(), set())
    landed: list[str] = []
    rejected: dict[str, Verdict] = {}
    heads = {base}
    for _ in range(20 * len(spec) + 20):
        if not queued:
            break
        out, known = run_screened(repo, trunk, [q for q, _ in queued], [p for _, p in queued], verify, runners,
                                  batch, 0.1, known)
        assert not out.conflicted
        if out.landed:      # a chain on trunk whose tip passed, exactly
            assert out.landed_verdict is seen[out.landed[-1][1]] and out.landed_verdict.ok
            parent = trunk
            for _, c in out.landed:
                assert [str(x) for x in repo[c].parent_ids] == [parent]
                parent = c
            trunk = out.trunk_after
            heads.add(trunk)
            landed += [q.change for q, _ in out.landed]
        for q, v in out.rejected:
            assert not v.ok
            # the failing tree is a trunk and the culprit's own lane's prefix, nothing else
            at, lane = v.detail, []
            while at not in heads:
                lane.append(repo[at].message.strip())
                [at] = [str(x) for x in repo[at].parent_ids]
            assert lane[0] == q.change and {lane_of[n] for n in lane} == {lane_of[q.change]}
            rejected[q.change] = v
        gone = set(landed) | set(rejected)
        queued = [(q, p) for q, p in queued if q.change not in gone]
    assert not queued, "the rounds did not decide every change"
    assert len(landed) == len(set(landed))
    # a passing change lands; of a pair that fail together, the later to meet the other is rejected
    assert set(rejected) - set(pair) == failing
    assert set(landed) == {q.change for q, _ in made} - failing - set(rejected)
    assert len(set(pair) & set(rejected)) == (1 if len(pair) == 2 else 0)
