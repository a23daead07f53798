"""The real Gemini CLI (`gemini -p … --output-format json`) in a workspace that `lonca session start
--harness gemini` prepared, driven offline by the scripted model server speaking the Gemini API:
its hooks call `lonca hook --harness gemini` and its MCP client mounts `lonca mcp`.

Installed by `make harness-deps` into .harness/ (pinned); missing, the tests skip, except in CI
(CI=true), where that is a failure. Gemini CLI reads a workspace's settings only in a trusted
folder: the test trusts it in the CLI's home, as a runner does."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from model_server import ModelServer, text, tool_use  # noqa: E402

from conftest import ROOT  # noqa: E402
from helpers import acquire  # noqa: E402
from harness_runs import require_cli, session_of, start  # noqa: E402

GEMINI = ROOT / ".harness" / "node_modules" / ".bin" / "gemini"


@pytest.fixture(autouse=True)
def installed():
    require_cli(GEMINI.exists(), "Gemini CLI")


EDIT = {"old_string": "return amount * 2", "new_string": "return amount * 3", "instruction": "triple it"}


@pytest.fixture
def database_url():
    """SQLite only: the harness, not the store, is what these tests exercise."""
    return None


def gemini(env, ws: Path, script: list[dict], tmp_path: Path) -> tuple[dict, ModelServer]:
    home = tmp_path / "gemini-home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(ws): "TRUST_FOLDER"}))
    with ModelServer(script) as model:
        genv = {**env.w.env, "GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "offline", "HOME": str(home)}
        res = subprocess.run([str(GEMINI), "-p", "do the task", "--output-format", "json", "--approval-mode", "yolo",
                              "-m", "gemini-2.5-pro"], cwd=ws, env=genv, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout), model


def test_gemini_edit_of_a_held_symbol_is_denied_and_a_leased_one_runs_and_is_proposed(repo_env, tmp_path):
    bob = repo_env.agent("bob")
    acquire(repo_env.client, bob["token"], "lib/util.py#helper", intent="rework the helper")
    ws = start(repo_env, tmp_path, "ada", "gemini")
    assert repo_env.w.cli("lease", "acquire", "app.py#charge", "--intent", "triple it", cwd=ws).returncode == 0
    helper = (ws / "lib" / "util.py").read_text()
    result, model = gemini(repo_env, ws, [
        tool_use("replace", {"file_path": str(ws / "lib" / "util.py"), "old_string": "return 42",
                             "new_string": "return 43", "instruction": "x"}),
        tool_use("replace", {"file_path": str(ws / "app.py"), **EDIT}),
        text("finished"),                                   # AfterAgent: sent back once
        tool_use("mcp_lonca_propose", {"intent": "triple the charge"}),
        text("done"),
    ], tmp_path)
    assert (ws / "lib" / "util.py").read_text() == helper
    assert "return amount * 3" in (ws / "app.py").read_text()
    responses = model.function_responses()
    denied = json.dumps(responses[0])
    assert "lease_missing:lib/util.py#helper" in denied and "bob" in denied
    assert any("no proposal carries" in t and "app.py" in t for t in model.gemini_user_texts())
    assert responses[-1]["name"] == "mcp_lonca_propose" and '"status": "queued"' in responses[-1]["response"]["output"]
    # the rules reached the model: .gemini/GEMINI.md is in its context
    assert "Working in a Lonca workspace" in json.dumps(model.turns[0])
    sess = session_of(repo_env, ws)
    assert sess["level"] == "hooks" and sess["harness"] == "gemini" and sess["taint"] is None
