"""The seed's shape for what verification found: the attestations of the change.integrate entry.

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


def store_log(repo: pygit2.Repository, result: CheckResult) -> str | None:
    """The output tail of the last attempt as a blob; None when it printed nothing."""
    last = result.last
    if last is None or not last.output:
        return None
    return str(repo.create_blob(last.output))


def _details(result: CheckResult) -> dict[str, str]:
    details = {}
    if result.spec.kind == "named":
        details["name"] = result.spec.name
    last = result.last
    if last is not None:
        details["attempts"] = str(len(result.runs))
        details["duration_ms"] = str(result.duration_ms)
        if last.exit is not None:
            details["exit"] = str(last.exit)
        if last.timed_out:
            details["timed_out"] = "true"
        if last.overflowed:
            details["output_over_cap"] = "true"
    return details


def attestation(result: CheckResult, subject_tree: str, log_id: str | None) -> dict:
    """{"check", "result", "subject_tree", "details", "env", "log", "producer"}."""
    return {"check": result.spec.kind, "result": result.result, "subject_tree": subject_tree,
            "details": _details(result), "env": env_hash(result), "log": log_id,
            "producer": PRODUCER}
