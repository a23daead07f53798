"""Batches: bisection logic, and a real batch of 8 whose check fails because of one change."""
from __future__ import annotations

import math
import sys

import pygit2
import pytest

from lonca.queue import CheckSpec, QueuedChange, Verdict, find_culprit, find_culprit_wide, reasons, run_batch, verify_tree

from queue_git import SIG, commit, files_of


@pytest.mark.parametrize("n", range(1, 21))
def test_find_culprit_every_position(n):
    for culprit in range(n):
        calls = []

        def verify(k):
            assert 0 < k < n
            calls.append(k)
            return k <= culprit     # every prefix holding the culprit fails

        assert find_culprit(n, verify) == culprit
        assert len(calls) <= math.ceil(math.log2(n))


@pytest.mark.parametrize("width", [1, 2, 3, 7])
@pytest.mark.parametrize("n", range(1, 21))
def test_find_culprit_wide_against_the_bisection(n, width):
    for culprit in range(n):
        waves, asked = [], []

        def verify_many(points):
            assert points and all(0 < k < n for k in points) and len(points) <= width
            waves.append(points)
            asked.extend(points)
            return {k: k <= culprit for k in points}

        assert find_culprit_wide(n, verify_many, width) == culprit
        assert len(asked) == len(set(asked))        # no prefix verified twice
        assert len(waves) <= math.ceil(math.log(n) / math.log(width + 1) - 1e-9) + (width > 1)
        if width == 1:                              # the bisection itself, wave for call
            calls = []
            find_culprit(n, lambda k: calls.append(k) or k <= culprit)
            assert [w[0] for w in waves] == calls


def _repo(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    trunk = commit(repo, {"README": b"base\n", "shared.txt": b"one\n"}, [])
    return repo, str(trunk)


def _change(repo, trunk, i, files):
    base_files = files_of(repo, trunk)
    c = commit(repo, {**base_files, **files}, [trunk], f"change {i}")
    return QueuedChange(f"change{i}", str(c), trunk, f"change {i}\n", SIG)


# the policy's `tests`: fails when the candidate holds f5.txt
TESTS = CheckSpec("tests", (sys.executable, "-c", "import os, sys; sys.exit(1 if os.path.exists('f5.txt') else 0)"), 60)


def _verify(repo, seen):
    def verify(prefix, candidate):
        seen.append([c.change for c in prefix])
        results = verify_tree(repo, candidate, [TESTS])
        why = reasons(results, ["tests"])
        return Verdict(not why, why, results)
    return verify


def test_failing_check_rejects_only_the_culprit_of_a_batch_of_8(tmp_path):
    repo, trunk = _repo(tmp_path)
    changes = [_change(repo, trunk, i, {f"f{i}.txt": f"{i}\n".encode()}) for i in range(8)]
    seen = []
    out = run_batch(repo, trunk, changes, _verify(repo, seen))
    assert [c.change for c, _ in out.landed] == [f"change{i}" for i in range(5)]
    assert [(c.change, v.reasons) for c, v in out.rejected] == [("change5", ["verification_failed:tests"])]
    assert [c.change for c in out.requeued] == ["change6", "change7"]
    assert out.conflicted == []
    assert len(seen) <= 1 + math.ceil(math.log2(8))
    assert out.landed_verdict.ok
    # the landed commits form a chain on trunk, each holding its predecessors
    parent = trunk
    for ch, c in out.landed:
        assert [str(p) for p in repo[c].parent_ids] == [parent]
        assert repo[c].message == ch.message
        parent = c
    tip = files_of(repo, out.trunk_after)
    assert {f"f{i}.txt" for i in range(5)} <= set(tip) and "f5.txt" not in tip
    # nothing touched a ref
    assert list(repo.references) == []
    # the rest, queued again, lands on the new trunk without the culprit
    again = run_batch(repo, out.trunk_after, out.requeued, _verify(repo, seen))
    assert [c.change for c, _ in again.landed] == ["change6", "change7"]
    assert {"f6.txt", "f7.txt", "f0.txt"} <= set(files_of(repo, again.trunk_after))


def test_a_wide_bisection_verifies_prefixes_at_once(tmp_path):
    import threading
    repo, trunk = _repo(tmp_path)
    changes = [_change(repo, trunk, i, {f"f{i}.txt": f"{i}\n".encode()}) for i in range(8)]
    seen, lock, running, peak = [], threading.Lock(), [0], [0]

    def verify(prefix, candidate):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            seen.append(len(prefix))
        try:
            results = verify_tree(pygit2.Repository(repo.path), candidate, [TESTS])
        finally:
            with lock:
                running[0] -= 1
        why = reasons(results, ["tests"])
        return Verdict(not why, why, candidate)
    out = run_batch(repo, trunk, changes, verify, width=3)
    assert [c.change for c, _ in out.landed] == [f"change{i}" for i in range(5)]
    assert [c.change for c, _ in out.rejected] == ["change5"]
    assert out.landed_verdict.detail == out.landed[-1][1] and out.landed_verdict.ok
    assert 1 < peak[0] <= 3 and len(seen) <= 1 + 3 * 2


def test_conflicting_changes_are_taken_out_before_verifying(tmp_path):
    repo, trunk = _repo(tmp_path)
    a = _change(repo, trunk, 0, {"shared.txt": b"two\n"})
    b = _change(repo, trunk, 1, {"shared.txt": b"three\n"})     # conflicts with a once a is in
    c = _change(repo, trunk, 2, {"other.txt": b"x\n"})
    seen = []
    out = run_batch(repo, trunk, [a, b, c], _verify(repo, seen))
    assert [ch.change for ch, _ in out.landed] == ["change0", "change2"]
    [(ch, integration)] = out.conflicted
    assert ch.change == "change1" and integration.conflicts == ["shared.txt#<file>"]
    assert seen == [["change0", "change2"]]


def test_all_pass_is_one_verification(tmp_path):
    repo, trunk = _repo(tmp_path)
    changes = [_change(repo, trunk, i, {f"g{i}.txt": b"ok\n"}) for i in range(8)]
    seen = []
    out = run_batch(repo, trunk, changes, _verify(repo, seen))
    assert len(out.landed) == 8 and len(seen) == 1 and out.rejected == [] and out.requeued == []
