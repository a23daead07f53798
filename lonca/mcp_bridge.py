"""`lonca mcp`: an MCP stdio server in an agent's workspace, as Las expects of a child (seed 003):
protocol 2024-11-05, one JSON-RPC message per line each way, `initialize` exactly once (any other
request before it fails, and so does a second one), `ping`, `tools/list`, `tools/call`. stdout
carries protocol messages only; errors are generic, with no internal diagnostics. After each tool,
what the session's inbox holds is a second content item; while it serves, it heartbeats."""
import json
import sys
from pathlib import Path

import lonca
from lonca.mcp_keepalive import KeepAlive
from lonca.mcp_session import AgentSession
from lonca.mcp_tools import BY_NAME, TOOLS, ToolFailure, inbox_text, invoke
from lonca.client import Unreachable
from lonca.output import Usage
from lonca.protocol import LoncaError

PROTOCOL_VERSION = "2024-11-05"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
INSTRUCTIONS = ("Lonca: take a lease on the symbols you edit (symbols gives their ids, preview says what your "
                "local changes need), then propose; follow events until your change integrates.")


class Refused(Exception):
    """A JSON-RPC error answer: a code and a fixed, generic message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class Bridge:
    def __init__(self, session: AgentSession):
        self.session = session
        self.initialized = False
        self.keepalive: KeepAlive | None = None

    def answer(self, msg) -> dict | None:
        """The response to one message, None for what JSON-RPC answers nothing: a notification
        (no id, well-formed or not) and a response (this server sends no requests). An id is
        echoed whenever it is one; `"id": null` only where JSON-RPC 2.0 says so, when there is
        no usable id to answer (a line that is not an object, an id of another type)."""
        if not isinstance(msg, dict):
            return error(None, INVALID_REQUEST, "invalid request: one JSON-RPC object per line (no batches)")
        if "id" not in msg:
            if msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
                sys.stderr.write("lonca mcp: a malformed notification was ignored\n")
            return None  # notifications (initialized, cancelled) need nothing from a server this small
        if "method" not in msg and ("result" in msg or "error" in msg):
            sys.stderr.write("lonca mcp: a response was ignored (this server sends no requests)\n")
            return None
        if not valid_id(msg["id"]):
            return error(None, INVALID_REQUEST, "invalid request: id is a string or an integer")
        if msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
            return error(msg["id"], INVALID_REQUEST, "invalid request")
        rid = msg["id"]
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": self.dispatch(msg["method"], msg.get("params") or {})}
        except Refused as e:
            return error(rid, e.code, e.message)
        except Exception as e:  # a bug here must not kill the server nor leak its details into the stream
            sys.stderr.write(f"lonca mcp: {msg['method']} failed ({type(e).__name__})\n")
            return error(rid, INTERNAL_ERROR, "internal error")

    def dispatch(self, method: str, params) -> dict:
        if not isinstance(params, dict):
            raise Refused(INVALID_PARAMS, "params must be an object")
        if method == "initialize":
            if self.initialized:
                raise Refused(INVALID_REQUEST, "already initialized")
            self.initialized = True
            self.keepalive = KeepAlive(self.session)
            self.keepalive.start()
            return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "lonca", "version": lonca.__version__}, "instructions": INSTRUCTIONS}
        if not self.initialized:
            raise Refused(INVALID_REQUEST, "not initialized")
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [{"name": t.name, "description": t.description, "inputSchema": t.schema} for t in TOOLS]}
        if method == "tools/call":
            return self.call(params)
        raise Refused(METHOD_NOT_FOUND, "method not found")

    def call(self, params: dict) -> dict:
        tool = BY_NAME.get(params.get("name"))
        if tool is None:
            raise Refused(INVALID_PARAMS, "unknown tool")
        try:
            # the harness's before-tool event of this call should have reached the worker first:
            # mcp.call tells it which tool runs, so a session whose hooks do not run is seen
            self.session.call("mcp.call", {"tool": tool.name})
        except (LoncaError, Usage, Unreachable):  # the tool itself meets it and answers with it
            pass
        try:
            out = invoke(self.session, tool, params.get("arguments"))
            failed = (out.get("decision") or {}).get("outcome") == "deny"
        except ToolFailure as f:
            out, failed = f.to_json(), True
        content = [{"type": "text", "text": json.dumps(out, ensure_ascii=False)}]
        news = inbox_text(self.session)
        self.session.client.close()  # one connection per tool: a bridge idle for long holds none the daemon must close
        if news:
            content.append({"type": "text", "text": news})
        return {"content": content, "isError": failed}

    def close(self) -> None:
        if self.keepalive:
            self.keepalive.stop()


def error(rid, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def valid_id(rid) -> bool:
    """MCP's RequestId: a string or an integer (never null, a boolean or a fraction)."""
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def parse_line(raw: bytes):
    """One message, strictly: UTF-8 that is JSON and holds no lone surrogate (which no answer
    could carry back in UTF-8). ValueError otherwise."""
    msg = json.loads(raw)
    json.dumps(msg, ensure_ascii=False).encode()   # UnicodeEncodeError is a ValueError
    return msg


def unparsed_reply(raw: bytes) -> dict | None:
    """The answer to a line that is not strict JSON: a parse error, with the request's id when
    the line is JSON but for its bytes (bad UTF-8, a lone surrogate) so the id can be read;
    nothing for such a notification."""
    try:
        msg = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return error(None, PARSE_ERROR, "parse error")
    if isinstance(msg, dict) and "id" not in msg:
        return None
    rid = msg.get("id") if isinstance(msg, dict) else None
    return error(rid if valid_id(rid) else None, PARSE_ERROR, "parse error: not UTF-8 JSON")


def serve(session: AgentSession, stdin, stdout) -> int:
    bridge = Bridge(session)
    try:
        for raw in stdin:
            if not raw.strip():
                continue
            try:
                msg = parse_line(raw)
            except ValueError:
                reply = unparsed_reply(raw)
            else:
                reply = bridge.answer(msg)
            if reply is not None:
                stdout.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
                stdout.flush()
    finally:
        bridge.close()
    return 0


def cmd_mcp(args) -> int:
    session = AgentSession.open(Path.cwd())
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must never land in the protocol stream
    return serve(session, sys.stdin.buffer, protocol_out)


def register(sub) -> None:
    p = sub.add_parser("mcp", help="serve the agent tools over MCP on stdio, in a workspace")
    p.set_defaults(run=cmd_mcp)
