"""The agent loop through `lonca mcp`'s tools (lease_acquire, propose, events, sync), three rounds
in a row with another agent's change integrated in between: after each sync the workspace is
trunk exactly, and each proposal holds only the new edit (issue 11)."""
import json
import subprocess
import time

from agents.mcp_pipe import McpPipe


def porcelain(ws) -> str:
    return subprocess.run(["git", "-C", str(ws), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def integrated(pipe: McpPipe, change: str, start: int, timeout: float = 30) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        ev, _, err = pipe.tool("events", {"from": start})
        assert not err, ev
        start = ev["next"]
        if any(e["kind"] == "integrated" and e.get("change") == change for e in ev["events"]):
            return start
        time.sleep(0.2)
    raise AssertionError(f"{change} never integrated")


def landed(pipe: McpPipe, change: str, timeout: float = 30) -> None:
    """Another session's change integrated, as the status tool shows it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, _, _ = pipe.tool("status")
        if next(c for c in st["changes"] if c["change"] == change)["status"]["status"] == "integrated":
            return
        time.sleep(0.2)
    raise AssertionError(f"{change} never integrated")


def test_mcp_loop_three_rounds(repo, agent):
    ws, _ = agent("ada")
    other, _ = agent("bob")
    pipe = McpPipe(repo, ws)
    try:
        pipe.initialize()
        start, fee, answer = 1, "amount * 2", "return 42"
        for k in range(3, 6):
            assert porcelain(ws) == ""
            got, _, err = pipe.tool("lease_acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                                      "intent": f"fee {k}"})
            assert not err and got["decision"]["outcome"] == "allow", got
            (ws / "app.py").write_text((ws / "app.py").read_text().replace(fee, f"amount * {k}"))
            fee = f"amount * {k}"
            proposed, _, err = pipe.tool("propose", {"intent": f"fee {k}"})
            assert not err and proposed["status"] == "queued", proposed
            start = integrated(pipe, proposed["change"], start)
            diff, _, _ = pipe.tool("diff", {"change": proposed["change"]})
            assert [f["path"] for f in diff["files"]] == ["app.py"]  # only the new edit
            synced, _, err = pipe.tool("sync")
            assert not err and synced["conflicts"] == [], synced
            assert porcelain(ws) == "" and fee in (ws / "app.py").read_text()
            # bob, on another file, through the CLI
            repo.cli("lease", "acquire", "lib/util.py#helper", "--intent", f"helper {k}", "--json", cwd=other, check=True)
            (other / "lib" / "util.py").write_text((other / "lib" / "util.py").read_text().replace(answer, f"return {40 + k}"))
            answer = f"return {40 + k}"
            theirs = json.loads(repo.cli("propose", "-m", f"helper {k}", "--json", cwd=other, check=True).stdout)
            landed(pipe, theirs["change"])
            repo.cli("sync", "--json", cwd=other, check=True)
            synced, _, err = pipe.tool("sync")
            assert not err and synced["updated"] == ["lib/util.py"] and synced["conflicts"] == [], synced
            assert porcelain(ws) == "" and porcelain(other) == ""
            assert fee in (ws / "app.py").read_text() and answer in (ws / "lib" / "util.py").read_text()
    finally:
        pipe.close()
