"""`lonca hook`: the one hook program of every harness and event. It reads the harness's JSON on
stdin and hands it to the worker's hook.input, which reads it with the harness's profile and says
what comes next; the program answers in the harness's own shape and exit codes:

- at session start: hook.bind, then the worker's context answer with the session filled in;
- a tool call the worker denies: the worker's `output` (Claude Code's and Codex's
  `hookSpecificOutput.permissionDecision: "deny"`, Gemini CLI's `decision: "deny"`), whose reason
  the model reads; a write tool's files go with the call, as the workspace holds them;
- after a tool call or a prompt: what the session's inbox holds, as the harness's context;
- a stop with local changes no proposal carries: hook.stop's `output` (`decision: "block"`).

Anything allowed prints nothing and exits 0, so the harness's own permissions still apply. When the
worker can not be asked (unreachable, the session over), the hook says so on stderr and exits 1,
which the three harnesses treat as a non-blocking error: the write then goes unobserved, and its
proposal escalates (unobserved_write) instead of the agent being stuck."""
import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lonca import workspace as wsp
from lonca.client import Client, Unreachable
from lonca.harness import PROFILES, written_paths
from lonca.output import Usage
from lonca.protocol import LoncaError

# what a harness sends that the worker never reads and the wire may refuse (a tool's output can
# hold a fraction, or text shaped like a token): left out of the input hook.input gets
UNREAD = ("tool_response",)


def run(args) -> int:
    try:
        data = json.loads(sys.stdin.buffer.read())
    except ValueError:
        return _failed("the harness sent no JSON object on stdin")
    if not isinstance(data, dict):
        return _failed("the harness sent no JSON object on stdin")
    moment = PROFILES[args.harness]["events"].get(data.get("hook_event_name"))
    if moment is None:
        return 0    # an event Lonca does not hook: nothing to say
    try:
        ws = wsp.find(Path(args.workspace or data.get("cwd") or os.getcwd()))
        with Client() as c:
            out = _answer(c, ws, args.harness, data, moment)
    except (Unreachable, LoncaError, Usage) as e:
        return _failed(str(getattr(e, "message", None) or e))
    if out is not None:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


def _failed(why: str) -> int:
    sys.stderr.write(f"lonca hook: {why}\n")
    return 1


def _call(c: Client, ws: wsp.Workspace, method: str, params: dict):
    return c.call(method, params, repo=ws.repo, token=ws.agent_token())


def _answer(c: Client, ws: wsp.Workspace, harness: str, data: dict, moment: str) -> dict | None:
    params = {"harness": harness, "input": {k: v for k, v in data.items() if k not in UNREAD}, "workspace": str(ws.root)}
    tool_input = data.get("tool_input") if isinstance(data.get("tool_input"), dict) else {}
    named = written_paths(harness, PROFILES[harness]["write_tools"], data.get("tool_name"), tool_input) if moment == "before_tool" else None
    if named:
        cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
        params["base"] = ws.base
        params["files"] = [f for t in dict.fromkeys(named) for f in _as_held(ws.root, Path(cwd or ws.root) / t)]
    res = _call(c, ws, "hook.input", params)
    if res["phase"] == "session_start":
        return _start(c, ws, harness, data, res)
    if res["phase"] == "stop":
        return _call(c, ws, "hook.stop", {"harness": harness, "files": wsp.end_files(ws)}).get("output")
    return res.get("output")


def _start(c: Client, ws: wsp.Workspace, harness: str, data: dict, res: dict) -> dict:
    bound = _call(c, ws, "hook.bind", {"harness": harness, "harness_session": str(data.get("session_id") or "unknown")[:256],
                                       "sudo_without_password": _sudo_without_password(), "workspace": str(ws.root)})
    tools = res["tool_prefix"]
    text = (f"Lonca: this workspace is session {res['session']} of the repository {ws.repo} (observation level "
            f"{bound['level']}). Before you edit a symbol, take its lease ({tools}lease_acquire); an edit of a symbol "
            f"you hold no lease for is denied before it runs. Propose finished work with {tools}propose.")
    if bound["scratch"]:
        text += " Notes and logs go under " + ", ".join(bound["scratch"]) + "."
    return _fill(res["context"], text)


def _fill(template, text: str):
    """The worker's answer template with each "{context}" hole filled."""
    if isinstance(template, dict):
        return {k: _fill(v, text) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, text) for v in template]
    return template.replace("{context}", text) if isinstance(template, str) else template


def _sudo_without_password() -> bool:
    """Whether this user can sudo without a password, which lets an agent step around its hooks."""
    if os.geteuid() == 0:
        return True
    if shutil.which("sudo") is None:
        return False
    try:
        return subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _as_held(root: Path, target: Path) -> list[dict]:
    """A file a write tool names, as the workspace holds it now (none when it is absent or not a
    plain file inside the workspace): the worker applies the tool to it."""
    full = Path(os.path.normpath(target))
    try:
        rel = full.relative_to(root)
    except ValueError:
        return []
    if full.is_symlink() or not full.is_file():
        return []
    return [{"path": rel.as_posix(), "content_b64": base64.b64encode(full.read_bytes()).decode(), "mode": None}]
