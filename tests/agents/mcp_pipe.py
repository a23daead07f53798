"""`lonca mcp` as a child on raw pipes, for what the SDK will not send: requests out of order,
bad lines, notifications. Every stdout line must be one JSON-RPC message."""
import json
import queue
import subprocess
import sys
import threading


class McpPipe:
    def __init__(self, worker, ws):
        self.proc = subprocess.Popen([sys.executable, "-m", "lonca", "mcp"], cwd=ws, env=worker.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.stdout: list[bytes] = []
        self.ids = iter(range(1, 1_000_000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line)

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict | None = None) -> None:
        self.send_raw(json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}}).encode())

    def recv(self, timeout: float = 30) -> dict:
        msg = json.loads(self.lines.get(timeout=timeout))
        assert msg["jsonrpc"] == "2.0" and ("result" in msg) != ("error" in msg), msg
        return msg

    def request(self, method: str, params: dict | None = None) -> dict:
        rid = next(self.ids)
        self.send_raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}).encode())
        msg = self.recv()
        assert msg["id"] == rid, msg
        return msg

    def initialize(self) -> dict:
        got = self.request("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                          "clientInfo": {"name": "pipe", "version": "1"}})
        self.notify("notifications/initialized")
        return got

    def tool(self, name: str, args: dict | None = None) -> tuple[dict, list[str], bool]:
        """(the tool's JSON answer, the further content items' texts, isError)."""
        res = self.request("tools/call", {"name": name, "arguments": args or {}})["result"]
        texts = [c["text"] for c in res["content"]]
        return json.loads(texts[0]), texts[1:], res["isError"]

    def close(self) -> str:
        """Close stdin (the host's way to stop a child); the child's stderr."""
        self.proc.stdin.close()
        self.proc.wait(30)
        return self.proc.stderr.read().decode()
