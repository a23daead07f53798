"""Verifying a candidate tree: the owed checks, in order, in one checkout of the tree.

The worker turns the policy in force into `CheckSpec`s (`build`, `tests`, `extended` for a
change that reaches others, then each named check owed, as `Policy.runs` lists them). They share
one checkout, in order, because a test suite usually needs what the build made. A run that does
not pass is tried again up to `attempts` times in all (flaky suites); after a check that does
not pass, the rest are skipped: the candidate is refused already.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import pygit2

from .checkout import KeptCheckout, checkout_tree
from .checks import CheckRun, run_check

BUILTIN = ("build", "tests", "extended")
DEFAULT_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class CheckSpec:
    name: str                   # build | tests | extended | a named check of the policy
    argv: tuple[str, ...]
    timeout_s: float
    env_names: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    attempts: int = 1

    @property
    def kind(self) -> str:
        """The attestation's check kind: a named check is "named"."""
        return self.name if self.name in BUILTIN else "named"


@dataclass
class CheckResult:
    spec: CheckSpec
    runs: list[CheckRun] = field(default_factory=list)   # every attempt; empty when skipped

    @property
    def result(self) -> str:
        return self.runs[-1].result if self.runs else "skipped"

    @property
    def duration_ms(self) -> int:
        return sum(r.duration_ms for r in self.runs)

    @property
    def last(self) -> CheckRun | None:
        return self.runs[-1] if self.runs else None


class CheckWatch(Protocol):
    """Who follows the checks while they run (the worker's queue.running): told of each attempt's
    start, given its output as it comes, told of its end."""

    def started(self, name: str, attempt: int) -> Callable[[bytes], None]: ...

    def ended(self, name: str, attempt: int, run: CheckRun) -> None: ...


def run_specs(cwd: Path, specs: list[CheckSpec], watch: CheckWatch | None = None) -> list[CheckResult]:
    """The checks in order in the checkout at `cwd`, each tried up to its `attempts`, stopping
    at the first that does not pass (the rest are skipped)."""
    results = [CheckResult(s) for s in specs]
    for res in results:
        spec = res.spec
        for attempt in range(1, max(1, spec.attempts) + 1):
            output = watch.started(spec.name, attempt) if watch else None
            run = run_check(list(spec.argv), cwd, spec.env_names, spec.timeout_s, spec.max_bytes, output)
            res.runs.append(run)
            if watch:
                watch.ended(spec.name, attempt, run)
            if res.result == "pass":
                break
        if res.result != "pass":
            break
    return results


def verify_tree(repo: pygit2.Repository, tree: pygit2.Oid | str, specs: list[CheckSpec],
                workdir: Path | None = None, watch: CheckWatch | None = None,
                kept: KeptCheckout | None = None) -> list[CheckResult]:
    """Run the checks on a checkout of `tree`: `kept` brought to that tree (a runner slot's
    checkout, kept for the next check), or else a fresh temporary folder (under `workdir` when
    given), removed afterwards."""
    if not specs:
        return []
    if kept is not None:
        kept.update(repo, tree)
        return run_specs(kept.root, specs, watch)
    root = Path(tempfile.mkdtemp(prefix="lonca-check-", dir=workdir))
    try:
        cwd = root / "tree"
        checkout_tree(repo, tree, cwd)
        return run_specs(cwd, specs, watch)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def reasons(results: list[CheckResult], owed: list[str]) -> list[str]:
    """The reasons that refuse a candidate: verification_failed:<check> and
    verification_error:<check> for what ran and did not pass, verification_missing:<check>
    for an owed check no result accounts for. Empty when every owed check passed."""
    out = []
    by_name = {r.spec.name: r for r in results}
    for r in results:
        if r.result == "fail":
            out.append(f"verification_failed:{r.spec.name}")
        elif r.result == "error":
            out.append(f"verification_error:{r.spec.name}")
    refused = bool(out)
    for name in owed:
        r = by_name.get(name)
        if r is None or (r.result == "skipped" and not refused):
            out.append(f"verification_missing:{name}")
    return out
