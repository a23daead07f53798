"""A scripted model API on loopback, for driving the real Claude Code and Gemini CLIs offline.

Claude Code (`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`) sends its turns to POST /v1/messages and
reads them as a stream of server-sent events (message_start, content_block_start/delta/stop,
message_delta, message_stop). Each request that offers tools is a turn of the agent loop: it gets
the next step of the script, a tool call or a final text. Requests without tools (titles, summaries
Claude Code asks for on the side) get a short text and do not consume the script. Every turn's
request body is kept, so a test reads what Claude Code sent back after each tool call (the
tool_result, with a hook's denial reason in it).

Gemini CLI (`GOOGLE_GEMINI_BASE_URL`) posts to /v1beta/models/<model>:streamGenerateContent?alt=sse
(generateContent for side requests); a step is a candidate with one part, a functionCall or a text,
and what it sends back after a tool is a functionResponse part.

Codex (a custom model provider whose base_url is http://127.0.0.1:PORT/v1, wire_api "responses")
posts every turn to /v1/responses and reads server-sent events (response.created,
response.output_item.done, response.completed). A step is one output item: a function_call (JSON
arguments), a custom_tool_call (its input is text: apply_patch's patch) or an assistant message;
what it sends back after a tool is a function_call_output or custom_tool_call_output item."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tool_use(name: str, input: dict | str, namespace: str | None = None) -> dict:
    """A tool call; an input that is text is a Responses API custom tool's (Codex's apply_patch),
    and a namespace is that of a Responses API namespace tool (Codex's MCP tools: mcp__<server>)."""
    return {"tool_use": {"name": name, "input": input, **({"namespace": namespace} if namespace else {})}}


def text(words: str) -> dict:
    return {"text": words}


class ModelServer:
    """`script` is a list of steps (tool_use(...) or text(...)); past its end every turn is a
    final text, so Claude Code always ends."""

    def __init__(self, script: list[dict]):
        self.script = list(script)
        self.turns: list[dict] = []      # request bodies of agent-loop turns, in order
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "ModelServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_step(self, body: dict) -> dict:
        with self.lock:
            if not body.get("tools"):
                return text("ok")
            self.turns.append(body)
            return self.script.pop(0) if self.script else text("done")

    def function_responses(self) -> list[dict]:
        """Every functionResponse Gemini CLI sent back, in order, each once."""
        out = []
        for body in self.turns:
            for part in body["contents"][-1]["parts"]:
                if "functionResponse" in part and part["functionResponse"] not in out:
                    out.append(part["functionResponse"])
        return out

    def gemini_user_texts(self) -> list[str]:
        return ["\n".join(p.get("text", "") for p in body["contents"][-1]["parts"]) for body in self.turns]

    def codex_outputs(self) -> list[dict]:
        """Every tool output item Codex sent back, in order, each once (a later turn repeats them)."""
        out, seen = [], set()
        for body in self.turns:
            for item in body.get("input", []):
                if item.get("type") in ("function_call_output", "custom_tool_call_output") and item["call_id"] not in seen:
                    seen.add(item["call_id"])
                    out.append(item)
        return out

    def codex_texts(self) -> list[str]:
        """The text of every user or developer message of the last turn (a Stop hook's reason, a
        hook's added context and the instructions come as such)."""
        items = self.turns[-1].get("input", []) if self.turns else []
        return [c.get("text", "") for item in items if item.get("type") == "message" for c in item.get("content") or []
                if isinstance(c, dict)]

    def tool_results(self) -> list[dict]:
        """Every tool_result block Claude Code sent back, in order."""
        out = []
        for body in self.turns:
            msg = body["messages"][-1]
            if msg["role"] == "user" and isinstance(msg["content"], list):
                out += [b for b in msg["content"] if b.get("type") == "tool_result"]
        # a later turn repeats the earlier ones: keep each tool_use_id once
        seen, unique = set(), []
        for b in out:
            if b["tool_use_id"] not in seen:
                seen.add(b["tool_use_id"])
                unique.append(b)
        return unique

    def user_texts(self) -> list[str]:
        """The text of the last user message of each turn (a Stop hook's reason comes as one)."""
        out = []
        for body in self.turns:
            msg = body["messages"][-1]
            content = msg["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            out.append("\n".join(b.get("text", "") for b in blocks if b.get("type") == "text"))
        return out

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such route"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 10})
                elif ":streamGenerateContent" in path or ":generateContent" in path:
                    step = server.next_step(body)
                    reply = _gemini(step)
                    if "alt=sse" in self.path:
                        data = f"data: {json.dumps(reply)}\r\n\r\n".encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    else:
                        self._json(200, reply)
                elif path == "/v1/responses":
                    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                                   for e in _responses(server.next_step(body))).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif path == "/v1/messages":
                    step = server.next_step(body)
                    if body.get("stream"):
                        self._stream(body, step)
                    else:
                        self._json(200, _message(body, step))
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such route"}})

            def _json(self, code: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict, step: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in _events(body, step):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


_ids = iter(range(1, 1 << 30))


def _message(body: dict, step: dict) -> dict:
    n = next(_ids)
    if "tool_use" in step:
        content = [{"type": "tool_use", "id": f"toolu_{n:08d}", **step["tool_use"]}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": step["text"]}]
        stop = "end_turn"
    return {"id": f"msg_{n:08d}", "type": "message", "role": "assistant", "model": body.get("model", "scripted"),
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _events(body: dict, step: dict):
    msg = _message(body, step)
    content = msg.pop("content")
    yield "message_start", {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}}
    for i, block in enumerate(content):
        if block["type"] == "tool_use":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {**block, "input": {}}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def _responses(step: dict) -> list[dict]:
    """One turn of the Responses API as its stream of events: one output item, then completed."""
    n = next(_ids)
    if "tool_use" in step and isinstance(step["tool_use"]["input"], str):
        item = {"type": "custom_tool_call", "id": f"ctc_{n}", "call_id": f"call_{n}", "name": step["tool_use"]["name"],
                "input": step["tool_use"]["input"], "status": "completed"}
    elif "tool_use" in step:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": step["tool_use"]["name"],
                "arguments": json.dumps(step["tool_use"]["input"]), "status": "completed",
                **({"namespace": step["tool_use"]["namespace"]} if "namespace" in step["tool_use"] else {})}
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": step["text"], "annotations": []}]}
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    return [{"type": "response.created", "response": {"id": f"resp_{n}"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": f"resp_{n}", "usage": usage}}]


def _gemini(step: dict) -> dict:
    part = ({"functionCall": {"name": step["tool_use"]["name"], "args": step["tool_use"]["input"]}}
            if "tool_use" in step else {"text": step["text"]})
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "scripted"}
