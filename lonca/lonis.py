"""The Lonis provider surface (seed 000, "The Provider Model"): `lonca --mode json manifest`,
`tools list`, `tools describe <id>` and `call <id>` (one JSON value on stdin, then EOF; blocks on
stdout; a ToolError on stderr with Lonis's exit codes on failure). `--mode ndjson` writes one block
per line, flushed as each is made. The tools are lonca mcp's, with ids lonca:<namespace>:<name>; a
call runs as the workspace's agent session and its blocks are attributed to that session's actor.

A host runs `lonca call <id>` as a subprocess tool (seed 000: "argv: call op"), so blocks are the
default output: `--mode json` unless `--mode` says otherwise, before the command or after it as
`lonis call <id> <input> --mode json` writes it. The input is one JSON value on stdin, inline
(`call <id> '{"a": 1}'`) or in a file (`call <id> @input.json`). A Lonis host clears the
environment and runs tools in a neutral folder, so the workspace may be given as
`call --workspace DIR`; without it, the current folder's workspace is used."""
import json
import sys
from pathlib import Path

import lonca
from lonca.client import Unreachable
from lonca.lonis_blocks import EXIT_CODES, MODES, SCHEMA_VERSION, block, json_content_hash, message_data, render_human, tool_error
from lonca.mcp_session import AgentSession
from lonca.mcp_tools import BY_ID, TOOLS, Tool, ToolFailure, inbox, invoke, tool_failure
from lonca.output import Usage
from lonca.protocol import LoncaError

RESULT_SCHEMA = "https://industrialalgebra.com/schemas/lonis.block/result/v1"


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


def mode_of(args) -> str:
    """--mode after the command wins over --mode before it; blocks (json) when neither is given."""
    return getattr(args, "mode_after", None) or args.mode or "json"


def cmd_manifest(args) -> int:
    return print_value(mode_of(args), manifest())


def cmd_tools_list(args) -> int:
    return print_value(mode_of(args), {"provider": "lonca", "tools": manifest()["tools"]})


def cmd_tools_describe(args) -> int:
    tool = BY_ID.get(args.name)
    if tool is None:
        return fail(mode_of(args), tool_error("not_found", f"no tool {args.name}; `lonca tools list` names them"))
    return print_value(mode_of(args), contract(tool))


def read_input(given: str | None):
    """The tool's arguments: inline JSON, @file, or stdin when the argument is left out."""
    where = "stdin"
    try:
        if given is None:
            text = sys.stdin.read()
        elif given.startswith("@"):
            where = given[1:]
            text = Path(where).read_text(encoding="utf-8")
        else:
            text, where = given, "the input argument"
        return json.loads(text)
    except (OSError, ValueError):
        raise ToolFailure("invalid", f"{where} must hold one JSON value (the tool's arguments)") from None


def message_blocks(session: AgentSession, producer: str, where: str, input_hash: str) -> list[dict]:
    """What the session's inbox holds, one message block per sender, attributed to that sender:
    another agent's words are theirs, not the recipient's; a reservation is the daemon's."""
    events = inbox(session)["events"]
    if not events:
        return []
    agents = {}
    if any(e.get("from") for e in events):
        try:
            agents = {s["id"]: s["agent"] for s in session.call("status")["sessions"]}
        except (LoncaError, Usage, Unreachable):
            pass
    by_sender: dict[str | None, list[dict]] = {}
    for e in events:
        # a reviewer's comment is a human's words: it names the human, not a session
        by_sender.setdefault(f"human:{e['human']}" if e.get("human") else e.get("from"), []).append(e)
    out = []
    for sender, evs in by_sender.items():
        who = sender if sender and sender.startswith("human:") else f"agent:{agents.get(sender, 'unknown')}/{sender}" if sender else "daemon"
        threads = sorted({e["thread"] for e in evs if e.get("thread")})
        data = message_data("\n".join(e["text"] for e in evs), reply_to=threads[0] if len(threads) == 1 else None)
        out.append(block("message", data, identity=who, producer=producer, where=where, input_hash=input_hash))
    return out


def cmd_call(args) -> int:
    mode = mode_of(args)
    tool = BY_ID.get(args.name)
    if tool is None:
        return fail(mode, tool_error("not_found", f"no tool {args.name}; `lonca tools list` names them"))
    out = Emitter(mode)
    try:
        given = read_input(args.input)
        try:
            session = AgentSession.open(Path(args.workspace) if args.workspace else Path.cwd())
            who = session.call("whoami")
        except (LoncaError, Usage, Unreachable) as e:
            raise tool_failure(e) from None
        result = invoke(session, tool, given)
    except ToolFailure as f:
        return fail(mode, tool_error(f.code, f.message, {"code": f.code, **f.extra}))
    except Exception as e:  # a bug: a ToolError all the same, without its details
        sys.stderr.write(f"lonca: {tool.tool_id} failed ({type(e).__name__})\n")
        return fail(mode, tool_error("internal", "the tool failed inside lonca"))
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
    for blk in message_blocks(session, tool.tool_id, stamp["where"], stamp["input_hash"]):
        out.emit(blk)
    out.close()
    return 0


def _provider(group, name: str, help: str, run):
    """A provider command that also takes --mode after its name (a subparser's own default would
    overwrite the one given before the command, hence its own dest)."""
    p = group.add_parser(name, help=help)
    p.add_argument("--mode", dest="mode_after", choices=MODES, help="json (default), ndjson or human")
    p.set_defaults(run=run)
    return p


def register(sub) -> None:
    _provider(sub, "manifest", "Lonis: this provider's manifest", cmd_manifest)
    tools = sub.add_parser("tools", help="Lonis: the agent tools").add_subparsers(dest="tools_cmd", metavar="COMMAND")
    _provider(tools, "list", "the tools' ids and descriptions", cmd_tools_list)
    _provider(tools, "describe", "one tool's contract", cmd_tools_describe) \
        .add_argument("name", help="a tool id, lonca:<namespace>:<name>")
    c = _provider(sub, "call", "Lonis: run a tool and print its blocks", cmd_call)
    c.add_argument("name", help="a tool id, lonca:<namespace>:<name>")
    c.add_argument("input", nargs="?", help="the arguments: inline JSON, or @FILE (default: one JSON value on stdin)")
    c.add_argument("--workspace", help="the agent's workspace (default: the one this folder is in)")
