"""A worker with few file descriptors (issue 16, "File descriptors"): under `ulimit -n 256` its
connection caps shrink to fit, so more connections than fit evict the quietest ones (`closed`)
instead of failing accept, new ones are served, and its output stays small. Under a low soft
limit and a higher hard one, it raises the soft limit instead (issue 18)."""
import json
import resource
import socket
import subprocess
import sys
import time

import pytest

from conftest import Worker

NOFILE = 256
CONNECTIONS = 400


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


class FewDescriptors(Worker):
    nofile = (NOFILE, NOFILE)  # the soft and hard limits the worker starts under

    def start(self) -> "Worker":
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)
        self.proc = subprocess.Popen([sys.executable, "-m", "lonca", "daemon"], env=self.env, cwd=self.tmp,
                                     stdout=open(self.output, "ab"), stderr=subprocess.STDOUT, preexec_fn=limit)
        from lonca.client import wait_until_answering
        assert wait_until_answering(self.proc, self.socket, 30) is None, self.output.read_text()
        return self


def _line(s: socket.socket) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf)


def test_more_connections_than_descriptors(tmp_path):
    w = FewDescriptors(tmp_path, None).start()
    conns = []
    try:
        for _ in range(CONNECTIONS):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(w.socket))
            conns.append(s)
        last = conns[-1]
        last.sendall(b'{"id": 1, "method": "ping"}\n')
        pong = _line(last)
        assert pong["ok"] and pong["result"]["refused"]["evicted"] >= CONNECTIONS - NOFILE
        first = _line(conns[0])  # the quietest went first, told why
        assert first["id"] == 0 and first["error"]["code"] == "closed"
        assert w.proc.poll() is None
        out = w.output.read_text()
        assert "allow" in out and "Traceback" not in out and len(out) < 20_000
    finally:
        for s in conns:
            s.close()
        w.stop()


SERVER = """
import asyncio, logging, resource, sys
from pathlib import Path
from lonca.service.config import Limits
from lonca.service.server import SocketServer

logging.basicConfig(level=logging.INFO)

async def main():
    async def handle(peer, req):
        return {"id": req["id"], "ok": True, "result": {}}
    server = SocketServer(Path(sys.argv[1]), Limits(), handle)
    await server.start()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))  # fewer than its caps were made for
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_accept_out_of_descriptors_evicts_and_logs_one_line(tmp_path):
    """Descriptors gone below the caps (taken by something else): accept fails; the server
    evicts the quietest connections instead of logging a traceback per attempt."""
    path = tmp_path / "s.sock"
    out = tmp_path / "server.out"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(path)], stdout=open(out, "wb"), stderr=subprocess.STDOUT)
    conns = []
    try:
        for _ in range(100):
            if "ready" in out.read_text():
                break
            time.sleep(0.1)
        for _ in range(150):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(20)
            s.connect(str(path))
            conns.append(s)
        conns[-1].sendall(b'{"id": 7, "method": "ping"}\n')
        assert _line(conns[-1]) == {"id": 7, "ok": True, "result": {}}
        assert _line(conns[0])["error"]["code"] == "closed"
        text = out.read_text()
        assert "Traceback" not in text and text.count("accepting a connection failed") <= 2
    finally:
        for s in conns:
            s.close()
        proc.kill()
        proc.wait()


class LowSoftLimit(FewDescriptors):
    """A soft limit under a far higher hard one, as the usual 1 024 is."""
    nofile = (NOFILE, 4096)


def test_a_low_soft_limit_is_raised_to_fit_the_caps(tmp_path):
    w = LowSoftLimit(tmp_path, None).start()
    conns = []
    try:
        limits = open(f"/proc/{w.proc.pid}/limits").read()
        soft = next(line.split()[3] for line in limits.splitlines() if line.startswith("Max open files"))
        assert int(soft) == 1024 + 96   # max_conns and the reserve, within the hard limit
        for _ in range(CONNECTIONS):    # more than NOFILE descriptors would have held
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(w.socket))
            conns.append(s)
        conns[-1].sendall(b'{"id": 1, "method": "ping"}\n')
        assert _line(conns[-1])["result"]["refused"]["evicted"] == 0
        assert "file descriptors allow" not in w.output.read_text()
    finally:
        for s in conns:
            s.close()
        w.stop()
