"""What the real-harness tests (Claude Code, Codex, Gemini CLI) share: the CLI's presence, the
`lonca` commands they run, and the worker's state they wait for."""
import json
import os
import time
from pathlib import Path

import pytest


def require_cli(present: bool, name: str) -> None:
    """A missing CLI skips these tests, and fails them in CI (CI=true)."""
    if not present:
        why = f"{name} is not installed in .harness/: run `make harness-deps`"
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)


def run(w, *args: str, cwd: Path | None = None) -> dict:
    res = w.cli(*args, "--json", cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def start(env, tmp_path: Path, name: str, harness: str, *extra: str) -> Path:
    """`lonca session start --harness <harness>` into a new workspace tmp_path/name."""
    ws = tmp_path / name
    out = run(env.w, "session", "start", "--repo", "demo", "--agent", name, "--dir", str(ws), "--harness", harness, *extra)
    assert out["workspace"] == str(ws)
    return ws


def session_of(env, ws: Path) -> dict:
    """The workspace's session as status shows it."""
    sid = json.loads((ws / ".lonca" / "workspace.json").read_text())["session"]
    return next(s for s in env.status()["sessions"] if s["id"] == sid)


def wait_status(env, change: str, want: str) -> dict:
    for _ in range(100):
        ch = next(c for c in env.status()["changes"] if c["change"] == change)
        if ch["status"]["status"] == want:
            return ch
        time.sleep(0.1)
    raise AssertionError(f"{change} is {ch['status']}, not {want}")
