"""Merge queue benchmarks (`python -m bench queue`).

1. Integrations per second: 1 000 queued changes, each editing its own file of a 2 000-file
   repository and proposed on the same trunk, integrated one after the other with no checks:
   lonca.queue (pygit2, in memory, then the trunk ref moved) beside the git CLI loop on the
   same repository and the same commits (`git merge-tree --write-tree`, `git commit-tree`,
   `git update-ref`). Both must end on the same tree.
2. Batched verification: 64 queued changes with a 2-second check, batches of the policy's size
   against one change at a time. One at a time costs a check per change, so its rate is
   measured on the first 8 changes.
3. Lanes: 32 queued changes, each its own file (independent by their facts), 10 % of them
   failing a 2-second check, batches of 16: independent lanes verified by 4 and 8 runners
   against one lane (today's batch and bisection), in the same run. Every good change must land
   and every failing one be rejected, on the trees their checks ran on.
4. The queue at team scale (bench/queue_team.py): 256 changes through a real worker and its
   runners, 1, 4 and 8 of them, three strategies, and a simulated SubmitQueue beside them.
   BENCH_QUEUE_ONLY=team runs this one alone.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from bench.queue_team import team_table
from bench.worker import table
from lonca.queue import CheckSpec, QueuedChange, Verdict, footprint, integrate, reasons, run_batch, run_lanes, verify_tree
from lonca.service.policy import DEFAULT as DEFAULT_POLICY

SIG = pygit2.Signature("Bench", "bench@lonca.invalid", 1_700_000_000, 0)
FILES, FOLDERS, CHANGES = 2000, 40, 1000


def _folder(i: int) -> str:
    return f"pkg{i % FOLDERS:02d}"


def build_repo(path: Path, n_files: int) -> tuple[pygit2.Repository, pygit2.Oid]:
    repo = pygit2.init_repository(str(path), bare=True)
    folders: dict[str, pygit2.TreeBuilder] = {}
    for i in range(n_files):
        blob = repo.create_blob(f"def f{i}(x):\n    return x + {i}\n".encode())
        folders.setdefault(_folder(i), repo.TreeBuilder()).insert(f"m{i}.py", blob, FileMode.BLOB)
    root = repo.TreeBuilder()
    for name, tb in folders.items():
        root.insert(name, tb.write(), FileMode.TREE)
    trunk = repo.create_commit("refs/heads/main", SIG, SIG, "base\n", root.write(), [])
    return repo, trunk


def make_change(repo: pygit2.Repository, base: pygit2.Oid, i: int, extra: bytes = b"") -> pygit2.Oid:
    """A commit on `base` that edits pkgNN/m<i>.py."""
    tree = repo[base].tree
    folder = _folder(i)
    sub = repo.TreeBuilder(repo[tree[folder].id])
    sub.insert(f"m{i}.py", repo.create_blob(f"def f{i}(x):\n    return x * {i}\n".encode() + extra), FileMode.BLOB)
    root = repo.TreeBuilder(tree)
    root.insert(folder, sub.write(), FileMode.TREE)
    return repo.create_commit(None, SIG, SIG, f"change {i}\n", root.write(), [base])


def _git(repo_path: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@lonca.invalid",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@lonca.invalid",
           "GIT_AUTHOR_DATE": "1700000000 +0000", "GIT_COMMITTER_DATE": "1700000000 +0000"}
    return subprocess.run(["git", "-c", "gc.auto=0", "--git-dir", str(repo_path), *args], env=env,
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def integration_rates() -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="lonca-bench-queue-") as tmp:
        path = Path(tmp) / "store.git"
        repo, base = build_repo(path, FILES)
        changes = [make_change(repo, base, i * (FILES // CHANGES)) for i in range(CHANGES)]
        repo.references.create("refs/heads/cli", base)

        trunk = base
        t0 = time.perf_counter()
        for c in changes:
            out = integrate(repo, trunk, c, base, "integrate\n", SIG)
            repo.references["refs/heads/main"].set_target(out.commit)
            trunk = out.commit
        ours = CHANGES / (time.perf_counter() - t0)

        cli_trunk = str(base)
        t0 = time.perf_counter()
        for c in changes:
            # git 2.39 has no --merge-base: it finds the base (the change's parent) itself
            tree = _git(path, "merge-tree", "--write-tree", cli_trunk, str(c)).splitlines()[0]
            cli_trunk = _git(path, "commit-tree", tree, "-p", cli_trunk, "-m", "integrate")
            _git(path, "update-ref", "refs/heads/cli", cli_trunk)
        theirs = CHANGES / (time.perf_counter() - t0)
        if str(repo[trunk].tree_id) != str(repo[cli_trunk].tree_id):
            raise RuntimeError("lonca.queue and git ended on different trees")
        return ours, theirs


def batch_rates(batch_size: int, n: int = 64, single: int = 8) -> tuple[float, float, int]:
    """(batched changes/s, one-at-a-time changes/s, verifications in the batched run)."""
    check = [CheckSpec("tests", ("sleep", "2"), 30)]
    with tempfile.TemporaryDirectory(prefix="lonca-bench-batch-") as tmp:
        repo, base = build_repo(Path(tmp) / "store.git", 200)
        queue = [QueuedChange(f"c{i}", str(make_change(repo, base, i)), str(base), f"change {i}\n", SIG)
                 for i in range(n)]
        calls = 0

        def verify(prefix, candidate):
            nonlocal calls
            calls += 1
            results = verify_tree(repo, candidate, check)
            why = reasons(results, ["tests"])
            return Verdict(not why, why, results)

        def drain(items: list[QueuedChange], size: int) -> float:
            trunk, pending = str(base), list(items)
            t0 = time.perf_counter()
            while pending:
                out = run_batch(repo, trunk, pending[:size], verify)
                if len(out.landed) != min(size, len(pending)):
                    raise RuntimeError(f"a batch did not land whole: {out.rejected} {out.conflicted}")
                trunk, pending = out.trunk_after, pending[size:]
            return len(items) / (time.perf_counter() - t0)

        batched = drain(queue, batch_size)
        batched_calls = calls
        one_at_a_time = drain(queue[:single], 1)
        return batched, one_at_a_time, batched_calls


def lane_rates(runners: list[int], n: int = 32, size: int = 16) -> dict[int, tuple[float, int]]:
    """runners -> (changes/s, checks run) draining the same queue; 1 runner is one lane."""
    check = [CheckSpec("tests", ("sh", "-c", "sleep 2; ! grep -rq BAD ."), 30)]
    failing = set(range(3, n, 10))      # 10 %
    out: dict[int, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="lonca-bench-lanes-") as tmp:
        repo, base = build_repo(Path(tmp) / "store.git", 200)
        queue, prints = [], {}
        for i in range(n):
            c = make_change(repo, base, i, b"# BAD\n" if i in failing else b"")
            queue.append(QueuedChange(f"c{i}", str(c), str(base), f"change {i}\n", SIG))
            path = f"{_folder(i)}/m{i}.py"
            prints[f"c{i}"] = footprint([path], {"edits": [f"{path}#f{i}"]})
        for r in runners:
            calls = 0

            def verify(prefix, candidate):
                nonlocal calls
                calls += 1
                store = pygit2.Repository(repo.path)    # each runner's thread its own handle
                results = verify_tree(store, candidate, check)
                why = reasons(results, ["tests"])
                return Verdict(not why, why, results)
            trunk, pending, landed, rejected = str(base), list(queue), set(), set()
            t0 = time.perf_counter()
            while pending:
                window = pending[:size]
                res = run_lanes(repo, trunk, window, [prints[c.change] for c in window], verify, r)
                landed |= {c.change for c, _ in res.landed}
                rejected |= {c.change for c, _ in res.rejected}
                trunk, pending = res.trunk_after, [c for c in pending if c.change not in landed | rejected]
            rate = n / (time.perf_counter() - t0)
            if rejected != {f"c{i}" for i in failing} or len(landed) != n - len(failing):
                raise RuntimeError(f"{r} runners: landed {len(landed)}, rejected {sorted(rejected)}")
            out[r] = (rate, calls)
    return out


def main() -> None:
    if os.environ.get("BENCH_QUEUE_ONLY") != "team":
        small_tables()
    print("\n-- the queue at team scale (issue 15) --", flush=True)
    team_table()


def small_tables() -> None:
    ours, git = integration_rates()
    rows = [(f"integrations/s, {CHANGES} changes, {FILES} files (vs git CLI)", ours, git, ">= 5x")]
    default = DEFAULT_POLICY.batch_size
    for size in (default, 8):
        batched, single, calls = batch_rates(size)
        label = "the policy's default" if size == default else "for comparison"
        rows.append((f"changes/s, 64 x 2 s check, batch {size}, {label} ({calls} checks)", batched, single,
                     ">= 8x" if size == default else "-"))
    lanes = lane_rates([1, 4, 8])
    one, one_calls = lanes[1]
    for r in (4, 8):
        rate, calls = lanes[r]
        rows.append((f"changes/s, 32 x 2 s, 10% fail, lanes x{r} ({calls} vs {one_calls} checks)", rate, one,
                     "-"))
    table(rows)
    print("baseline of the batch rows: one change per check, measured on 8 changes; "
          "of the lanes rows: one lane (batch and bisection) on the same queue", file=sys.stderr)


if __name__ == "__main__":
    main()
