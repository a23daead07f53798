"""The merge queue (`lonca.queue`): pygit2 integration, symbol merges, bounded checks, batches.

Imports nothing of Lonca but `lonca.symbols`. Creates git objects only; the worker logs and moves
refs. The API:

Merging (merge.py, symbol_merge.py, textmerge.py)
- `merge_trees(repo, base, ours, theirs, cache=None) -> MergeResult`: ours is trunk, theirs the
  change; each a commit or tree id. `MergeResult.tree` (merged tree id, None on any conflict),
  `.conflicts` (symbol ids such as `src/a.py#f`, `path#<file>` for a whole file),
  `.merged_paths` (changed on both sides and merged), `.conflicted_paths`, and
  `.conflict_text(path, tag) -> bytes | None`: the file for `sync`, with each conflict between
  `<<<<<<< local <tag>`, `======= <tag>` and `>>>>>>> trunk <tag>`.
- `integrate(repo, trunk_commit, change_commit, change_base, message, author, committer=None,
  cache=None) -> Integration` (`.commit` on trunk, or None with `.conflicts`; `.merge`). When
  the change's base is trunk, its tree is taken as is.

Verifying (checks.py, checkout.py, verification.py)
- `run_check(argv, cwd, env_names, timeout_s, max_bytes) -> CheckRun`: one bounded subprocess
  (`result` pass/fail/error, `exit`, `duration_ms`, `timed_out`, `overflowed`, `output` tail of at
  most 32 KiB, `log_truncated`, `error`).
- `checkout_tree(repo, tree, dest)`: a tree as plain files; `KeptCheckout(root).update(repo, tree)`:
  a runner slot's checkout kept between checks, brought to each tree by writing what differs
  (and undoing what the last check changed); `slot_folder()` names its folder for this process,
  `sweep_slots()` removes those of processes that no longer run.
- `CheckSpec(name, argv, timeout_s, env_names, max_bytes, attempts)`,
  `verify_tree(repo, tree, specs, kept=None) -> [CheckResult]` (one checkout, in order, retries, stop at
  the first check that does not pass), `reasons(results, owed)` -> verification_failed:<check>,
  verification_error:<check>, verification_missing:<check>.

Runners elsewhere (remote.py, celery_runner.py; Celery is imported only by the latter)
- `pack(repo, tree, specs) -> job`, `run_job(job)` (on the runner), `unpack_results`: a candidate's
  checks as one JSON job that carries the tree and nothing of the worker's.
- `celery_runner.verify_remote(repo, tree, specs) -> (results, runner)`; `celery_runner.app` is
  what `lonca runner` starts.

Recording (attest.py)
- `attestations(repo, result, subject_tree, runner=None) -> [dict]`: one per attempt, each with its own output
  tail stored as a blob (`log`); a pass after a failed attempt is marked `flaky`.

Batching (batching.py, lanes.py, lane_round.py)
- `find_culprit(n, verify) -> index`: bisection over prefixes, O(log n) verifications;
  `find_culprit_wide(n, verify_many, width)`: `width` prefixes at once per wave.
- `run_batch(repo, trunk, [QueuedChange], verify(prefix, commit) -> Verdict, width=1) -> BatchOutcome`
  (`landed` [(change, commit)], `landed_verdict` (of exactly the landed tree), `conflicted`,
  `rejected` [(change, verdict)], `requeued`, `verdicts`, `trunk_after`).
- `footprint(paths, facts) -> Footprint`, `depends(a, b)`, `partition([Footprint]) -> [[index]]`:
  independent lanes from symbol facts; `ahead(footprints, urgent) -> [index]`: the queue's order
  with prioritised changes first, never past a change they depend on; `clear_of(footprints, held)
  -> [index]`: those that may be verified before the `held` changes are decided (pipelining).
- `run_lanes(repo, trunk, changes, footprints, verify, runners, speculate=True, announce=None,
  groups=None) -> BatchOutcome`:
  the lanes verified in parallel, the union first; only a tree whose checks passed lands.
  `speculate` (the policy's [queue] speculate): prefixes bisected as wide as runners are free,
  and what passed so far checked as one tree beside each wave that looks for culprits;
  `announce(chain)` (pipelining) is told the tree the round lands if its checks pass.
- `run_screened(repo, trunk, changes, footprints, verify, runners, batch, p, known: Screening)
  -> (BatchOutcome, Screening)`: one wave (the policy's `[queue] rounds = "screened"`): the cleared
  lanes as L, L + groups of `group_size(p)` fresh changes, each suspect lane's prefixes on trunk;
  the biggest passing tree lands; the rest is queued with what the wave said of it.
- `Slots(size).take(priority)` (slots.py): the runner slots shared by rounds in flight.
"""
# This folder is named `queue` and sits at the repository root: when the root is on sys.path
# (`python -c`, `python -m` from the root) it would shadow the standard library's `queue`, which
# asyncio's thread pool imports. Imported under that top-level name, load the real stdlib module
# in our place and hand the name back.
if __name__ == "queue":
    import importlib.util as _ilu
    import os as _os
    import sys as _sys
    import sysconfig as _sc

    _spec = _ilu.spec_from_file_location("queue", _os.path.join(_sc.get_paths()["stdlib"], "queue.py"))
    _std = _ilu.module_from_spec(_spec)
    _sys.modules["queue"] = _std
    _spec.loader.exec_module(_std)
    globals().update({k: v for k, v in vars(_std).items() if not k.startswith("__")})

# Below, the library itself, only under its own name.
if __name__ != "queue":
    from .attest import attestations
    from .batching import BatchOutcome, QueuedChange, Verdict, find_culprit, find_culprit_wide, run_batch
    from .lane_round import Screening, group_size, run_lanes, run_screened
    from .lanes import Footprint, ahead, clear_of, depends, footprint, partition
    from .checkout import checkout_tree
    from .checks import CheckRun, run_check
    from .merge import Integration, MergeResult, integrate, merge_trees
    from .verification import CheckResult, CheckSpec, reasons, verify_tree

    __all__ = [
        "BatchOutcome", "CheckResult", "ahead", "clear_of", "CheckRun", "CheckSpec", "Footprint", "Integration",
        "MergeResult", "QueuedChange", "Verdict", "attestations", "checkout_tree", "depends",
        "find_culprit", "find_culprit_wide", "footprint", "integrate", "merge_trees", "partition", "reasons",
        "run_batch", "run_check", "run_lanes", "run_screened", "Screening", "group_size", "verify_tree",
    ]
