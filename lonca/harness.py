"""What each harness needs to run an agent under Lonca (seed 001, "CLI for runners": harness setup,
session start --harness, rules): its hook configuration calling `lonca hook`, the `lonca mcp`
registration, and the rules text for the model; and the harness's tool names, which the worker's
hook.event reads too (one table for both sides).

The files are written in the workspace and nowhere else. A target the repository tracks, a local
file that is not already setup's own text, or a symlink (at the target or on its way) is refused
before anything is written. Each file written is listed in `.git/info/exclude`, so setup is never
a local change and never proposed."""
import json
import os
import shlex
import sys
from pathlib import Path

HARNESSES = ("claude-code", "codex", "gemini")
# What Lonca knows of each harness's hooks (seed 001, hook.input: "the harness's profile"; a
# repository's policy may give its own, service/policy.py): its events by its own names, each read
# as one of the moments Lonca hooks (session_start; input, a prompt the user sent; before_tool and
# after_tool; stop), the prefix it gives the tools of the `lonca` MCP server, whether its
# before-tool event covers those tools (before_tool_mcp: mcp.call then expects one), whether
# context can be added after a tool call (tool_context), and its tools the worker judges.
# write_tools: the write tools, by the input field that names the file (service/hook_methods.py
# judges their calls; `lonca hook` sends the files they write as the workspace holds them).
# Codex's apply_patch names no file: its field holds a patch (lonca/apply_patch.py), whose headers
# name every file it writes; Codex also applies a shell command that is an apply_patch heredoc
# (patch_of). read_tools: the read tools, by the input field that names what they read: a read
# outside the workspace and the session's scratch taints the session (its words may steer the
# agent). Checked with Claude Code 2.1.332, Codex 0.171.0 and Gemini CLI 0.61.0.
PROFILES = {
    "claude-code": {"events": {"SessionStart": "session_start", "UserPromptSubmit": "input", "PreToolUse": "before_tool",
                               "PostToolUse": "after_tool", "Stop": "stop"},
                    "tool_prefix": "mcp__lonca__", "before_tool_mcp": True, "tool_context": True,
                    "write_tools": {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
                                    "NotebookEdit": "notebook_path"},
                    "read_tools": {"Read": "file_path", "Grep": "path", "Glob": "path"}},
    "codex": {"events": {"SessionStart": "session_start", "UserPromptSubmit": "input", "PreToolUse": "before_tool",
                         "PostToolUse": "after_tool", "Stop": "stop"},
              "tool_prefix": "mcp__lonca__", "before_tool_mcp": True, "tool_context": True,
              "write_tools": {"apply_patch": "command"}, "read_tools": {"view_image": "path"}},
    "gemini": {"events": {"SessionStart": "session_start", "BeforeAgent": "input", "BeforeTool": "before_tool",
                          "AfterTool": "after_tool", "AfterAgent": "stop"},
               "tool_prefix": "mcp_lonca_", "before_tool_mcp": False, "tool_context": True,
               "write_tools": {"replace": "file_path", "write_file": "file_path"},
               "read_tools": {"read_file": "file_path"}},
}
PATCH_TOOLS = {"apply_patch"}


def patch_of(harness: str, tool: str | None, tool_input: dict) -> tuple[str, str | None] | None:
    """(the patch text, the folder its paths are relative to or None) when a tool call applies a
    Codex patch: its apply_patch tool, or a shell command Codex runs as apply_patch itself."""
    if harness != "codex":
        return None
    command = tool_input.get("command")
    if not isinstance(command, str):
        return None
    from lonca.apply_patch import from_shell
    return (command, None) if tool in PATCH_TOOLS else from_shell(command) if tool == "Bash" else None


def written_paths(harness: str, write_tools: dict, tool: str | None, tool_input: dict) -> list[str] | None:
    """The paths (as the tool names them, from the harness's cwd) a write tool's call writes, by
    its profile's write_tools; None for a tool that writes no file the harness names, or whose
    input does not say (the worker answers that)."""
    patch = patch_of(harness, tool, tool_input)
    if patch is not None:
        from lonca.apply_patch import PatchError, parse
        try:
            return [os.path.join(patch[1], p) if patch[1] else p for op in parse(patch[0]) for p in op.paths()]
        except PatchError:
            return None
    key = write_tools.get(tool or "")
    value = tool_input.get(key) if key else None
    return [value] if isinstance(value, str) and tool not in PATCH_TOOLS else None


# -- answers in each harness's shape ----------------------------------------------------------------

def deny_output(harness: str, reason: str) -> dict:
    """A before-tool answer that refuses the call; the model reads the reason."""
    if harness == "gemini":
        return {"decision": "deny", "reason": reason}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def context_output(harness: str, event: str, text: str) -> dict:
    """An answer that adds text to what the model reads next (all three take this shape)."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def stop_output(harness: str, reason: str) -> dict:
    """A stop answer that sends the agent back to work, with the reason as its next prompt."""
    return {"decision": "deny" if harness == "gemini" else "block", "reason": reason}


# what the daemon's client reads to find the worker: setup bakes them into the hook and MCP
# commands, so the harness reaches the daemon of this workspace whatever its own environment
DAEMON_ENV = ("LONCA_SOCKET", "LONCA_HOME")

RULES = """\
# Working in a Lonca workspace

This folder is a Lonca workspace: several agents work on one repository at once, and Lonca keeps
them from editing the same code. Follow these rules.

1. Before you edit a symbol (a function, a class, a section), take a lease on it: `lease_acquire`
   (or `lonca lease acquire 'path#Name' --intent '<what you do and why>'`). `symbols` lists a
   file's symbol ids; `preview` says which leases your local changes need.
2. An edit of a symbol you hold no lease on is denied before it runs, with who holds it and the
   command that takes it. Do not work around a denial: take the lease, wait for it
   (`lonca lease interest`), or settle it with `negotiate`.
3. When a piece of work is done, propose it: the `propose` tool (or `lonca propose -m '<what and
   why>'`). Work left unproposed when you stop sends you back to propose it.
4. Write files with the editing tools, not with shell commands: a file written by a shell command
   is not seen by Lonca, and its proposal waits for a human.
5. Follow `events` until your change integrates; sync when trunk moved (`lonca sync`).
"""


def lonca_argv() -> list[str]:
    """How a harness starts this `lonca`: the script beside this Python, else `python -m lonca`."""
    script = Path(sys.executable).parent / "lonca"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "lonca"]


def daemon_env() -> dict[str, str]:
    return {k: os.environ[k] for k in DAEMON_ENV if os.environ.get(k)}


def setup(name: str, root: Path) -> dict:
    """The setup report (seed 001, `harness setup --json`) for harness `name` in workspace `root`."""
    root = root.resolve()
    env = daemon_env()
    mcp = {"command": lonca_argv()[0], "args": [*lonca_argv()[1:], "mcp"], "cwd": str(root), "env": env}
    report = {"harness": name, "known": name in HARNESSES, "written": [], "files": {}, "flags": [], "env": env,
              "note": "", "rules": RULES, "mcp": mcp}
    if name == "claude-code":
        report["files"] = _claude_code_files(root, mcp)
        # checked with claude 2.1.332 -p: a project settings file's permissions.allow does not reach
        # MCP tools, the command line's does
        report["flags"] = ["--allowedTools", "mcp__lonca"]
        report["note"] = ("Run `claude` in the workspace: its hooks call `lonca hook`, `lonca mcp` is registered as "
                          "the `lonca` MCP server, and .claude/CLAUDE.md holds the rules.")
    elif name == "gemini":
        report["files"] = _gemini_files(root, mcp)
        report["note"] = ("Run `gemini` in the workspace, trusted (Gemini CLI reads no workspace settings in an "
                          "untrusted folder): its hooks call `lonca hook`, `lonca mcp` is the `lonca` MCP server, "
                          "and .gemini/GEMINI.md holds the rules.")
    elif name == "codex":
        report["files"] = _codex_files(root, mcp)
        # checked with codex 0.171.0: `codex exec` reads a folder's .codex/ only once the folder is
        # trusted (--trust records that in CODEX_HOME), and runs a hook only once its text is
        # trusted, which only its interactive review or this flag gives
        report["flags"] = ["--trust", "--dangerously-bypass-hook-trust"]
        report["note"] = ("Run `codex` in the workspace and trust the folder and its hooks when it asks: its hooks call "
                          "`lonca hook`, `lonca mcp` is the `lonca` MCP server, and .codex/config.toml gives the "
                          "model the rules. `codex exec` can not ask: pass it the flags, which trust this folder "
                          "and run the hooks setup wrote without their review.")
    else:
        report["note"] = (f"Lonca writes no setup for {name} yet: register `lonca mcp` (run in the workspace) as an "
                          "MCP server named lonca and give the model the rules; its sessions stay unobserved.")
    return report


def _hook_command(root: Path, harness: str) -> str:
    env = [f"{k}={v}" for k, v in daemon_env().items()]
    argv = (["env", *env] if env else []) + lonca_argv() + ["hook", "--harness", harness, "--workspace", str(root)]
    return shlex.join(argv)


def _claude_code_files(root: Path, mcp: dict) -> dict[str, str]:
    command = _hook_command(root, "claude-code")
    hook = [{"type": "command", "command": command, "timeout": 60}]
    settings = {
        "hooks": {"SessionStart": [{"hooks": hook}], "UserPromptSubmit": [{"hooks": hook}],
                  "PreToolUse": [{"matcher": "*", "hooks": hook}], "PostToolUse": [{"matcher": "*", "hooks": hook}],
                  "Stop": [{"hooks": hook}]},
        "enabledMcpjsonServers": ["lonca"],
    }
    server = {"type": "stdio", "command": "sh", "args": ["-c", f"cd {shlex.quote(mcp['cwd'])} && exec "
                                                               f"{shlex.join([mcp['command'], *mcp['args']])}"],
              "env": mcp["env"]}
    return {".claude/settings.json": json.dumps(settings, indent=2) + "\n",
            ".mcp.json": json.dumps({"mcpServers": {"lonca": server}}, indent=2) + "\n",
            ".claude/CLAUDE.md": RULES}


def _gemini_files(root: Path, mcp: dict) -> dict[str, str]:
    """Checked with Gemini CLI 0.61.0: project hooks and mcpServers in .gemini/settings.json, and
    context.fileName naming .gemini/GEMINI.md (beside the default GEMINI.md) loads the rules."""
    hook = [{"type": "command", "command": _hook_command(root, "gemini")}]
    settings = {
        "hooks": {"SessionStart": [{"hooks": hook}], "BeforeAgent": [{"hooks": hook}],
                  "BeforeTool": [{"matcher": ".*", "hooks": hook}],
                  "AfterTool": [{"matcher": ".*", "hooks": hook}], "AfterAgent": [{"hooks": hook}]},
        "mcpServers": {"lonca": {"command": mcp["command"], "args": mcp["args"], "cwd": mcp["cwd"], "env": mcp["env"]}},
        "context": {"fileName": ["GEMINI.md", ".gemini/GEMINI.md"]},
    }
    return {".gemini/settings.json": json.dumps(settings, indent=2) + "\n", ".gemini/GEMINI.md": RULES}


def _codex_files(root: Path, mcp: dict) -> dict[str, str]:
    """Checked with Codex 0.171.0: project hooks in .codex/hooks.json (no matcher: every tool, its
    apply_patch and MCP tools included), the MCP server and the model's instructions in
    .codex/config.toml, so that a repository's own AGENTS.md stays as it is."""
    hook = [{"type": "command", "command": _hook_command(root, "codex"), "timeout": 60}]
    hooks = {"hooks": {event: [{"hooks": hook}] for event in PROFILES["codex"]["events"]}}

    def toml(value) -> str:     # a TOML string, array or inline table of strings (JSON's escapes are TOML's)
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(toml(v) for v in value) + "]"
        return json.dumps(value, ensure_ascii=False)
    config = (f"developer_instructions = {toml(RULES)}\n\n"
              "[mcp_servers.lonca]\n"
              f"command = {toml(mcp['command'])}\nargs = {toml(mcp['args'])}\ncwd = {toml(mcp['cwd'])}\n"
              f"env = {toml(mcp['env'])}\n"
              # `codex exec` refuses a tool that needs approval; the worker decides what lonca mcp's do
              'default_tools_approval_mode = "approve"\n')
    return {".codex/hooks.json": json.dumps(hooks, indent=2) + "\n", ".codex/config.toml": config}


def refusals(root: Path, files: dict[str, str]) -> list[str]:
    """Why each target can not be written: a symlink on its way, a file the repository tracks, a
    local file with other text. Empty: all can be."""
    from lonca.workspace import git
    tracked = set(git(root, "ls-files", "-z", "--", *files).decode().split("\0")) - {""}
    out = []
    for rel, text in files.items():
        target = root / rel
        parts = [root / Path(*Path(rel).parts[:i]) for i in range(1, len(Path(rel).parts) + 1)]
        if any(p.is_symlink() for p in parts):
            out.append(f"{rel}: a symlink stands at it or on its way")
        elif rel in tracked:
            out.append(f"{rel}: the repository has this file")
        elif target.exists() and (not target.is_file() or target.read_text(errors="replace") != text):
            out.append(f"{rel}: a local file is there")
    return out


def write(root: Path, report: dict) -> None:
    """Write the report's files (after `refusals` found none) and keep them out of git's view."""
    exclude = root / ".git" / "info" / "exclude"
    kept = exclude.read_text() if exclude.is_file() else ""
    lines = [f"/{rel}" for rel in report["files"] if f"/{rel}" not in kept.splitlines()]
    if lines:
        exclude.write_text(kept + ("" if kept.endswith("\n") or not kept else "\n") + "\n".join(lines) + "\n")
    for rel, text in report["files"].items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        report["written"].append(rel)


# -- commands --------------------------------------------------------------------------------------

def register(sub) -> None:
    from lonca.output import command
    h = sub.add_parser("harness", help="set a workspace up for an agent harness").add_subparsers(
        dest="harness_cmd", metavar="COMMAND")
    st = command(h, "setup", "write the hooks, the lonca mcp registration and the rules a harness needs", cmd_setup)
    st.add_argument("name", help=", ".join(HARNESSES))
    st.add_argument("--print", action="store_true", help="show what would be written, write nothing")
    command(sub, "rules", "the rules for a model working in a Lonca workspace", cmd_rules)
    register_hook(sub)


def register_hook(sub) -> None:
    hk = sub.add_parser("hook", help="the hook program a harness runs (JSON on stdin)")
    hk.add_argument("--harness", default="claude-code", choices=HARNESSES)
    hk.add_argument("--workspace", help="the workspace (default: the one the harness's cwd is in)")
    hk.set_defaults(run=cmd_hook)


def add_start_args(parser) -> None:
    """session start's --harness and --no-setup."""
    parser.add_argument("--harness", help=f"the agent's harness ({', '.join(HARNESSES)}): written into the "
                                          "signed session.start, and its setup into the workspace")
    parser.add_argument("--no-setup", action="store_true", help="with --harness: name it, write nothing")


def start_setup(args, root: Path, session: str) -> dict | None:
    """session start's setup report; the session has started whatever happens here."""
    from lonca.output import Usage
    if not args.harness or args.no_setup:
        return None
    report = setup(args.harness, root)
    refused = refusals(root, report["files"])
    if refused:
        raise Usage(f"session {session} started in {root}, but its {args.harness} setup was refused: "
                    + "; ".join(refused))
    write(root, report)
    return report


def cmd_setup(args) -> int:
    from lonca import workspace as wsp
    from lonca.output import OK, Usage, emit_json
    ws = wsp.find()
    report = setup(args.name, ws.root)
    if not args.print:
        refused = refusals(ws.root, report["files"])
        if refused:
            raise Usage("nothing written: " + "; ".join(refused))
        write(ws.root, report)
    if args.json:
        emit_json(report)
    else:
        for rel, text in report["files"].items():
            print(f"{'wrote' if rel in report['written'] else 'would write'} {rel}")
        print(report["note"])
    return OK


def cmd_hook(args) -> int:
    from lonca import hook_command
    return hook_command.run(args)


def cmd_rules(args) -> int:
    from lonca.output import OK, emit_json
    if args.json:
        emit_json({"rules": RULES})
    else:
        sys.stdout.write(RULES)
    return OK
