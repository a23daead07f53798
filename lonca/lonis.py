"""The Lonis provider surface (seed 000, "The Provider Model"): `lonca --mode json manifest`,
`tools list`, `tools describe <id>` and `call <id>` (one JSON value on stdin, then EOF; blocks on
stdout; a ToolError on stderr with Lonis's exit codes on failure). `--mode ndjson` writes one block
per line, flushed as each is made. The tools are lonca mcp's, with ids lonca:<namespace>:<name>; a
call runs as the workspace's agent session and its blocks are attributed to that session's actor.

A Lonis host clears the environment and runs tools in a neutral folder, so the workspace may be
given as `call --workspace DIR`; without it, the current folder's workspace is used."""
import json
import sys
from pathlib import Path

import lonca
from lonca.client import Unreachable
from lonca.lonis_blocks import EXIT_CODES, SCHEMA_VERSION, block, json_content_hash, message_data, render_human, tool_error
from lonca.mcp_session import AgentSession
from lonca.mcp_tools import BY_ID, TOOLS, Tool, ToolFailure, inbox_text, invoke, tool_failure
from lonca.output import Usage
from lonca.protocol import LoncaError

RESULT_SCHEMA = "https://industrialalgebra.com/schemas/lonis.block/result/v1"
MODES = ("json", "ndjson", "human")


def contract(t: Tool) -> dict:
    """The ToolContract of one tool: what it takes, what it emits, what it does to the world."""
    return {"name": t.tool_id, "description": t.description, "version": lonca.__version__,
            "schema_version": SCHEMA_VERSION, "input_schema": t.schema, "output_schema": RESULT_SCHEMA,
            "emits": ["result", "outcome", "message"], "determinism": t.determinism,
            "side_effects": t.side_effects, "cost": t.cost, "output_formats": list(MODES), "exit_codes": EXIT_CODES}


def manifest() -> dict:
    return {"name": "lonca", "version": lonca.__version__, "schema_version": SCHEMA_VERSION,
            "description": ("Symbol leases and a merge queue for AI coding agents: the agent tools of a Lonca workspace. "
                            "Each call also hands over what the session's inbox holds, as a message block; "
                            "what was handed over is not handed over again."),
            "output_formats": list(MODES), "exit_codes": EXIT_CODES,
            "tools": [{"name": t.tool_id, "description": t.description} for t in TOOLS]}


class Emitter:
    """Blocks to stdout in the chosen mode: json buffers one array, ndjson and human stream."""

    def __init__(self, mode: str):
        self.mode, self.blocks = mode, []

    def emit(self, blk: dict) -> None:
        if self.mode == "json":
            self.blocks.append(blk)
            return
        line = json.dumps(blk, ensure_ascii=False) if self.mode == "ndjson" else render_human(blk)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        if self.mode == "json":
            sys.stdout.write(json.dumps(self.blocks, ensure_ascii=False) + "\n")
            sys.stdout.flush()


def fail(mode: str, err: dict) -> int:
    sys.stderr.write((json.dumps(err, ensure_ascii=False) if mode != "human" else f"{err['kind']}: {err['message']}") + "\n")
    return err["exit_code"]


def print_value(mode: str, value) -> int:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=None if mode != "human" else 2) + "\n")
    return 0


def cmd_manifest(args) -> int:
    return print_value(args.mode, manifest())


def cmd_tools_list(args) -> int:
    return print_value(args.mode, {"provider": "lonca", "tools": manifest()["tools"]})


def cmd_tools_describe(args) -> int:
    tool = BY_ID.get(args.name)
    if tool is None:
        return fail(args.mode, tool_error("not_found", f"no tool {args.name}; `lonca --mode json tools list` names them"))
    return print_value(args.mode, contract(tool))


def read_input():
    text = sys.stdin.read()
    try:
        return json.loads(text)
    except ValueError:
        raise ToolFailure("invalid", "stdin must hold one JSON value (the tool's arguments), then EOF") from None


def cmd_call(args) -> int:
    tool = BY_ID.get(args.name)
    if tool is None:
        return fail(args.mode, tool_error("not_found", f"no tool {args.name}; `lonca --mode json tools list` names them"))
    out = Emitter(args.mode)
    try:
        given = read_input()
        try:
            session = AgentSession.open(Path(args.workspace) if args.workspace else Path.cwd())
            who = session.call("whoami")
        except (LoncaError, Usage, Unreachable) as e:
            raise tool_failure(e) from None
        result = invoke(session, tool, given)
    except ToolFailure as f:
        return fail(args.mode, tool_error(f.code, f.message, {"code": f.code, **f.extra}))
    except Exception as e:  # a bug: a ToolError all the same, without its details
        sys.stderr.write(f"lonca: {tool.tool_id} failed ({type(e).__name__})\n")
        return fail(args.mode, tool_error("internal", "the tool failed inside lonca"))
    stamp = {"identity": who["actor"], "producer": tool.tool_id, "where": f"repo:{who['repo']}",
             "input_hash": json_content_hash(given)}
    warnings = result.pop("warnings", None)
    decision = result.get("decision") or {}
    if decision.get("outcome") == "deny":
        reasons = ", ".join(decision.get("reasons", [])) or "denied"
        out.emit(block("outcome", {"status": "blocked", "kind": "denied", "message": f"denied: {reasons}",
                                   "details": result, "exit_code": 1}, warnings=warnings, **stamp))
    else:
        out.emit(block("result", {"output": result}, warnings=warnings, **stamp))
    news = inbox_text(session)
    if news:
        out.emit(block("message", message_data(news), **stamp))
    out.close()
    return 0


def register(sub) -> None:
    sub.add_parser("manifest", help="Lonis: this provider's manifest").set_defaults(run=cmd_manifest)
    tools = sub.add_parser("tools", help="Lonis: the agent tools").add_subparsers(dest="tools_cmd", metavar="COMMAND")
    tools.add_parser("list", help="the tools' ids and descriptions").set_defaults(run=cmd_tools_list)
    d = tools.add_parser("describe", help="one tool's contract")
    d.add_argument("name", help="a tool id, lonca:<namespace>:<name>")
    d.set_defaults(run=cmd_tools_describe)
    c = sub.add_parser("call", help="Lonis: run a tool; its arguments as one JSON value on stdin")
    c.add_argument("name", help="a tool id, lonca:<namespace>:<name>")
    c.add_argument("--workspace", help="the agent's workspace (default: the one this folder is in)")
    c.set_defaults(run=cmd_call)
