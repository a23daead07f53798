"""A candidate's checks on a runner that shares nothing with the worker but a message.

The worker packs the candidate tree (a tar of its files, as `checkout_tree` writes them) and the
check specs into one job; the runner unpacks it in a fresh temporary folder, runs the specs in
order with the same bounds as the worker would (`run_specs`: argv, cleared environment, time and
byte caps, the process group killed), and answers every attempt. No path, token or key of the
worker is in the job: a runner needs neither the worker's filesystem nor its credentials.
JSON only (base64 for bytes), so the transport can be any broker.
"""
from __future__ import annotations

import base64
import io
import shutil
import tarfile
import tempfile
from dataclasses import asdict
from pathlib import Path

import pygit2

from .checkout import checkout_tree
from .checks import CheckRun
from .verification import CheckResult, CheckSpec, run_specs

MAX_ARCHIVE = 64 * 1024 * 1024   # a tree bigger than this is not shipped: verify it in the worker


def pack(repo: pygit2.Repository, tree: pygit2.Oid | str, specs: list[CheckSpec]) -> dict:
    """The job for `tree` and `specs`; ValueError when the tree is over MAX_ARCHIVE."""
    root = Path(tempfile.mkdtemp(prefix="lonca-pack-"))
    try:
        checkout_tree(repo, tree, root / "tree")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(root / "tree", arcname=".")
        data = buf.getvalue()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if len(data) > MAX_ARCHIVE:
        raise ValueError(f"the candidate tree packs to {len(data)} bytes, over {MAX_ARCHIVE}")
    return {"tree": str(tree), "archive_b64": base64.b64encode(data).decode(),
            "specs": [asdict(s) for s in specs]}


def run_job(job: dict) -> list[list[dict]]:
    """On the runner: every attempt of every spec, as `CheckRun` fields (output in base64)."""
    specs = [CheckSpec(name=s["name"], argv=tuple(s["argv"]), timeout_s=float(s["timeout_s"]),
                       env_names=tuple(s["env_names"]), max_bytes=int(s["max_bytes"]),
                       attempts=int(s["attempts"])) for s in job["specs"]]
    root = Path(tempfile.mkdtemp(prefix="lonca-runner-"))
    try:
        cwd = root / "tree"
        cwd.mkdir()
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(job["archive_b64"])), mode="r:gz") as tar:
            tar.extractall(cwd, filter="data")     # no absolute paths, no links out, no devices
        results = run_specs(cwd, specs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [[dict(asdict(r), output=base64.b64encode(r.output).decode()) for r in res.runs] for res in results]


def unpack_results(specs: list[CheckSpec], answer: list[list[dict]]) -> list[CheckResult]:
    """The runner's answer as the worker's results, spec by spec."""
    out = [CheckResult(s) for s in specs]
    for res, runs in zip(out, answer):
        res.runs = [CheckRun(**dict(r, output=base64.b64decode(r["output"]))) for r in runs]
    return out


def error_results(specs: list[CheckSpec], why: str) -> list[CheckResult]:
    """No answer from a runner: the first check is an error saying why, the rest skipped."""
    out = [CheckResult(s) for s in specs]
    if out:
        out[0].runs = [CheckRun(list(specs[0].argv), "error", None, 0, False, False, b"", False, why)]
    return out
