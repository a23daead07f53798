"""`lonca hook`: the one hook program of every harness and event. It reads the harness's JSON on
stdin, asks the worker (hook.bind at session start, hook.event around a tool call, hook.stop when
the agent would finish) and answers in the harness's own shape and exit codes:

- a tool call the worker denies: Claude Code's `hookSpecificOutput.permissionDecision: "deny"`
  (Gemini CLI's `decision: "deny"`) with the worker's reason, which the model reads;
- after a tool call, what the session's inbox holds, as the harness's `additionalContext`;
- a stop with local changes no proposal carries: the worker's `output` (`decision: "block"`).

Anything allowed prints nothing and exits 0, so the harness's own permissions still apply. When the
worker can not be asked (unreachable, the session over), the hook says so on stderr and exits 1,
which both harnesses treat as a non-blocking error: the write then goes unobserved, and its
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
from lonca.harness import WRITE_TOOLS
from lonca.output import Usage
from lonca.protocol import LoncaError

# each harness's names for the four moments Lonca hooks
EVENTS = {"claude-code": {"SessionStart": "start", "PreToolUse": "pre", "PostToolUse": "post", "Stop": "stop"},
          "gemini": {"SessionStart": "start", "BeforeTool": "pre", "AfterTool": "post", "AfterAgent": "stop"},
          "codex": {}}
HOOK_EVENT_NAME = {"pre": "PreToolUse", "post": "PostToolUse"}   # hook.event's names, whatever the harness


def run(args) -> int:
    try:
        data = json.loads(sys.stdin.buffer.read())
    except ValueError:
        return _failed("the harness sent no JSON object on stdin")
    if not isinstance(data, dict):
        return _failed("the harness sent no JSON object on stdin")
    moment = EVENTS[args.harness].get(data.get("hook_event_name"))
    if moment is None:
        return 0    # an event Lonca does not hook: nothing to say
    try:
        ws = wsp.find(Path(args.workspace or data.get("cwd") or os.getcwd()))
        with Client() as c:
            out = MOMENTS[moment](c, ws, args.harness, data)
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


def _start(c: Client, ws: wsp.Workspace, harness: str, data: dict) -> None:
    _call(c, ws, "hook.bind", {"harness": harness, "harness_session": str(data.get("session_id") or "unknown")[:256],
                               "sudo_without_password": _sudo_without_password(), "workspace": str(ws.root)})
    return None


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


def _tool(c: Client, ws: wsp.Workspace, harness: str, data: dict, moment: str) -> dict | None:
    tool, tool_input = data.get("tool_name"), data.get("tool_input")
    tool_input = tool_input if isinstance(tool_input, dict) else {}
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    params = {"hook_event_name": HOOK_EVENT_NAME[moment], "tool_name": tool if isinstance(tool, str) else None,
              "tool_input": tool_input, "cwd": cwd, "workspace": str(ws.root), "harness": harness}
    key = WRITE_TOOLS[harness].get(tool) if moment == "pre" else None
    if key and isinstance(tool_input.get(key), str):
        params["base"] = ws.base
        params["files"] = _as_held(ws.root, Path(cwd or ws.root) / tool_input[key])
    res = _call(c, ws, "hook.event", params)
    if moment == "pre":
        return _deny(harness, res["reason"]) if res["decision"] == "deny" else None
    news = _call(c, ws, "inbox", {}).get("text")
    return {"hookSpecificOutput": {"hookEventName": data["hook_event_name"], "additionalContext": news}} if news else None


def _as_held(root: Path, target: Path) -> list[dict]:
    """The file a write tool names, as the workspace holds it now (none when it is absent or not a
    plain file inside the workspace): the worker applies the tool to it."""
    full = Path(os.path.normpath(target))
    try:
        rel = full.relative_to(root)
    except ValueError:
        return []
    if full.is_symlink() or not full.is_file():
        return []
    return [{"path": rel.as_posix(), "content_b64": base64.b64encode(full.read_bytes()).decode(), "mode": None}]


def _deny(harness: str, reason: str) -> dict:
    if harness == "gemini":
        return {"decision": "deny", "reason": reason}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def _stop(c: Client, ws: wsp.Workspace, harness: str, data: dict) -> dict | None:
    res = _call(c, ws, "hook.stop", {"harness": harness, "files": wsp.end_files(ws)})
    return res.get("output")


MOMENTS = {"start": _start, "pre": lambda c, ws, h, d: _tool(c, ws, h, d, "pre"),
           "post": lambda c, ws, h, d: _tool(c, ws, h, d, "post"), "stop": _stop}
