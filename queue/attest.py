"""The seed's shape for what verification found: the attestations of the change.integrate entry.

Every attempt of a check is an attestation of its own (`details.attempt` of `details.attempts`),
with its own output tail: a check that failed and then passed shows both, and the pass is marked
`flaky`.

An attestation is signed into the log, so it holds only strings and integers: the output tail is
stored as a blob in the repository's store and the attestation names its id (`log`). change.get's
evidence is made from the logged attestations, so it reads the same after a restart.
"""
from __future__ import annotations

import hashlib
import json

import pygit2

from .checks import child_env
from .verification import CheckResult

PRODUCER = "lonca.queue"


def env_hash(result: CheckResult) -> str:
    """What the check ran with, hashed: argv, the environment it saw, its bounds."""
    spec = result.spec
    doc = {"argv": list(spec.argv), "env": child_env(spec.env_names),
           "timeout_ms": int(spec.timeout_s * 1000), "max_bytes": int(spec.max_bytes)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def _details(result: CheckResult, attempt: int) -> dict[str, str]:
    details = {}
    if result.spec.kind == "named":
        details["name"] = result.spec.name
    if not result.runs:
        return details
    run = result.runs[attempt - 1]
    details["attempt"] = str(attempt)
    details["attempts"] = str(len(result.runs))
    details["duration_ms"] = str(run.duration_ms)    # this attempt's: the log's sums add up
    if run.exit is not None:
        details["exit"] = str(run.exit)
    if run.timed_out:
        details["timed_out"] = "true"
    if run.overflowed:
        details["output_over_cap"] = "true"
    if attempt == len(result.runs) > 1 and run.result == "pass":
        details["flaky"] = "true"    # passed only on a retry: counted (status.flaky)
    return details


def attestations(repo: pygit2.Repository, result: CheckResult, subject_tree: str,
                 runner: str | None = None) -> list[dict]:
    """One attestation per attempt, each naming its own output tail, stored as a blob (None
    when the attempt printed nothing); one `skipped` attestation for a check that did not run.
    `runner` names the runner that ran it when that was not the worker itself."""
    def one(attempt: int) -> dict:
        run = result.runs[attempt - 1] if result.runs else None
        details = _details(result, attempt)
        if runner:
            details["runner"] = runner
        return {"check": result.spec.kind, "result": run.result if run else "skipped",
                "subject_tree": subject_tree, "details": details, "env": env_hash(result),
                "log": str(repo.create_blob(run.output)) if run and run.output else None,
                "producer": PRODUCER}
    return [one(i) for i in range(1, max(1, len(result.runs)) + 1)]
