"""Agents under a user of their own (issue 14, "an agent must not be able to approve its own
change"): with LONCA_SOCKET_GROUP the socket is 0660 in that group, so another user can open it,
and the worker still answers only the uids it allows (LONCA_ALLOWED_UIDS); that user can not read
the human's file key. A real second user (nobody) connects with the system Python, over the
real socket. Needs root to switch users, as CI's container runs."""
import grp
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers import human_key

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-c"]
PING = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"id": 1, "method": "ping", "params": {}}).encode() + b"\\n")
print(s.makefile().readline().strip())
"""
READ = "import sys; open(sys.argv[1]).read()"


@pytest.fixture
def database_url():
    return None  # the socket is what is tested


@pytest.fixture
def shared_dir():
    """A folder the group may enter, outside pytest's (private) temporary root."""
    if os.getuid() != 0 or not shutil.which("setpriv"):
        if os.environ.get("CI") == "true":
            pytest.fail("switching to another user needs root and setpriv in CI")
        pytest.skip("switching to another user needs root and setpriv")
    path = Path(tempfile.mkdtemp(prefix="lonca-run-"))
    os.chown(path, -1, grp.getgrgid(NOBODY).gr_gid)
    path.chmod(0o750)
    yield path
    shutil.rmtree(path)


def ping_as_nobody(sock: Path) -> dict:
    out = subprocess.run([*AS_NOBODY, PING, str(sock)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_an_agent_user_reaches_the_socket_but_not_the_key(make_worker, shared_dir, monkeypatch):
    sock = shared_dir / "lonca.sock"
    group = grp.getgrgid(NOBODY).gr_name
    w = make_worker({"LONCA_SOCKET": str(sock), "LONCA_SOCKET_GROUP": group})
    st = sock.stat()
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == NOBODY
    refused = ping_as_nobody(sock)  # the group opens the socket; the worker answers allowed uids only
    assert refused["ok"] is False and refused["error"]["code"] == "forbidden"
    w.stop()

    w = make_worker({"LONCA_SOCKET": str(sock), "LONCA_SOCKET_GROUP": group, "LONCA_ALLOWED_UIDS": str(NOBODY)})
    assert ping_as_nobody(sock)["ok"] is True
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    key_file = Path(w.env["LONCA_HUMANS"]) / "alice.key"
    human_key("alice")
    read = subprocess.run([*AS_NOBODY, READ, str(key_file)], capture_output=True, text=True, timeout=30)
    assert read.returncode != 0 and "PermissionError" in read.stderr
    w.stop()

    # a socket of its own: on the one above, the stopping worker could still answer its ping
    bad = make_worker({"LONCA_SOCKET": str(shared_dir / "bad.sock"), "LONCA_SOCKET_GROUP": "no-such-group-here"},
                      start=False)
    with pytest.raises(RuntimeError) as e:
        bad.start()
    assert "LONCA_SOCKET_GROUP" in str(e.value)
