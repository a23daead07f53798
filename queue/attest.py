"""The seed's shapes for what verification found: attestations for the change.integrate entry
and the evidence of change.get.

An attestation is signed into the log, so it holds only strings and integers: the output tail is
stored as a blob in the repository's store and the attestation names its id (`log`); the
evidence carries the tail itself (at most 32 KiB) for people to read.
"""
from __future__ import annotations

import hashlib
import json

import pygit2

from .checks import TAIL_BYTES, child_env
from .merge import MergeResult
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


def merge_attestation(merge: MergeResult, subject_tree: str) -> dict:
    """The merge as an attestation: pass with the merged tree, fail with the conflicts."""
    details = {"merged_paths": ",".join(merge.merged_paths)} if merge.merged_paths else {}
    if merge.conflicts:
        details["conflicts"] = ",".join(merge.conflicts)
    return {"check": "merge", "result": "pass" if merge.ok else "fail",
            "subject_tree": merge.tree or subject_tree, "details": details,
            "env": hashlib.sha256(b"lonca.queue.merge").hexdigest(), "log": None,
            "producer": PRODUCER}


def evidence(result: CheckResult) -> dict:
    """One entry of change.get.evidence."""
    last = result.last
    log_text, truncated = _log_text(result)
    return {"check": result.spec.kind, "result": result.result,
            "exit": last.exit if last else None,
            "duration_ms": result.duration_ms if last else None,
            "attempts": len(result.runs) if last else None,
            "sandbox": None,
            "error": last.error if last else None,
            "details": _details(result),
            "log": log_text,
            "log_truncated": truncated}


def _log_text(result: CheckResult) -> tuple[str | None, bool]:
    """The tail as text within 32 KiB of UTF-8 (replacement characters can make it longer)."""
    last = result.last
    if last is None:
        return None, False
    text = last.output.decode("utf-8", "replace")
    encoded = text.encode()
    if len(encoded) <= TAIL_BYTES:
        return text, last.log_truncated
    return encoded[-TAIL_BYTES:].decode("utf-8", "ignore"), True
