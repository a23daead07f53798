"""README.md's agent section, walked as a newcomer would: `lonca up --demo` in the background (its
own worker, console and simulated agents, in a temporary LONCA_HOME), then every `$ ` line of the
section's console blocks, in order, in one shell started in a checkout-like folder, with `$EDITOR`
an editor that edits the leased function. Each line must succeed; the change it proposes must
reach the demo repository as the agent's."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT

EDITOR = """#!{python}
import re, sys
path = sys.argv[1]
text = open(path).read()
new = re.sub(r"(def charge\\(amount\\):\\n    return )(.*)\\n", r"\\1round(\\2, 2)\\n", text, count=1)
assert new != text, text
open(path, "w").write(new)
"""


def agent_section_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Agents\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```console\n(.*?)```", section, re.S)
    assert blocks, "the agent section has no console block"
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture
def demo(tmp_path):
    """`lonca up --demo` as a newcomer runs it, stopped with Ctrl-C (SIGINT) at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONCA_")}
    env.update(LONCA_HOME=str(tmp_path / "home"), LONCA_HUMANS=str(tmp_path / "humans"), LONCA_HUMAN="newcomer",
               PYTHONUNBUFFERED="1")
    out = tmp_path / "up.out"
    proc = subprocess.Popen([sys.executable, "-m", "lonca", "up", "--demo", "--port", str(free_port())], env=env,
                            cwd=tmp_path, stdout=open(out, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield env, out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group: the worker it started goes too
            proc.wait()
        print(f"--- {out} ---\n{out.read_text(errors='replace')[-4000:]}")


def lonca_json(env, *args, lines: bool = False) -> list:
    """What `lonca ARGS --json` printed: [value], or with `lines` one value a line; [] on failure."""
    res = subprocess.run([sys.executable, "-m", "lonca", *args, "--json"], env=env, capture_output=True, text=True,
                         timeout=60)
    if res.returncode != 0:
        return []
    return [json.loads(line) for line in res.stdout.splitlines()] if lines else [json.loads(res.stdout)]


def wait_for_the_demo(env, timeout: float = 60) -> None:
    """The demo's first round has played: bo proposed on an old base and released its fee lease,
    and its change has left the queue (what it pinned is free)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        entries = [e["entry"] for e in lonca_json(env, "log", "--repo", "demo", lines=True)]
        released = any(e["op"]["op"] == "lease.release" and e["actor"].get("name") == "bo" for e in entries)
        [st] = lonca_json(env, "status", "--repo", "demo") or [None]
        if released and st and not st["queue"] and not any(
                i["symbol"] == "billing.py#charge" for ls in st["leases"] for i in ls["items"]):
            return
        time.sleep(0.5)
    raise AssertionError("the demo's first round did not finish")


def test_the_agent_section_runs_against_the_demo(demo, tmp_path):
    env, _ = demo
    commands = agent_section_commands()
    assert commands[0].startswith("export PATH=") and not any(c.startswith(".venv/bin/") for c in commands[1:])
    checkout = tmp_path / "checkout"   # where a newcomer stands: a folder with the project's .venv
    checkout.mkdir()
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    editor = tmp_path / "editor"
    editor.write_text(EDITOR.format(python=sys.executable))
    editor.chmod(0o755)
    wait_for_the_demo(env)
    script = "set -eu\nset -x\n" + "\n".join(commands) + "\n"
    res = subprocess.run(["bash", "-c", script], cwd=checkout, env={**env, "EDITOR": str(editor)},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lonca_" not in res.stdout + res.stderr  # no token, ever
    assert "warning:" not in res.stderr and "Settle it" not in res.stderr, res.stderr
    [st] = lonca_json(env, "status", "--repo", "demo")
    mine = [c for c in st["changes"] if c["actor"].startswith("agent:dev/")]
    assert [c["intent"] for c in mine] == ["round the fee"], st["changes"]
    assert mine[0]["status"]["status"] not in ("denied", "withdrawn"), mine
    dev = [s for s in st["sessions"] if s["agent"] == "dev"]
    assert len(dev) == 1 and not dev[0]["active"]   # `session end` ended it
    assert "round(" in (checkout / "ws-dev" / "billing.py").read_text()
