"""The README's agent loop as a newcomer walks it, through the real CLI and a real worker: session
start, lease, edit, propose, wait for integration, sync, edit again, propose — round after round,
with another agent's change integrated in between. After each sync the workspace is trunk exactly
(`git status` clean, nothing lost) and the next proposal holds only the new edit (issue 11)."""
import json
import subprocess
import time

import pytest


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def run(w, *args, cwd=None, code=0):
    res = w.cli(*args, cwd=cwd)
    assert res.returncode == code, (args, res.stdout, res.stderr)
    assert "lonca_" not in res.stdout and "lonca_" not in res.stderr
    return json.loads(res.stdout) if "--json" in args and res.stdout else res


def git_out(ws, *args) -> str:
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


def wait_integrated(w, change, timeout=30) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = run(w, "status", "--json")
        found = [c for c in st["changes"] if c["change"] == change]
        if found and found[0]["status"]["status"] == "integrated":
            return {"trunk": st["trunk"], "change": found[0]}
        assert not found or found[0]["status"]["status"] == "queued", found
        time.sleep(0.2)
    raise AssertionError(f"{change} was never integrated")


def edit_round(w, ws, symbol, path, old, new, intent) -> dict:
    """One newcomer round: lease the symbol, edit the file, propose; the proposal holds only `path`."""
    assert git_out(ws, "status", "--porcelain") == ""
    run(w, "lease", "acquire", symbol, "--intent", intent, "--json", cwd=ws)
    text = (ws / path).read_text()
    assert old in text
    (ws / path).write_text(text.replace(old, new))
    assert git_out(ws, "status", "--porcelain") == f" M {path}\n"
    p = run(w, "propose", "-m", intent, "--json", cwd=ws)
    assert p["status"] == "queued", p
    done = wait_integrated(w, p["change"])
    assert done["change"]["paths"] == [path]  # only the new edit was proposed
    return done


def synced(w, ws, trunk) -> dict:
    s = run(w, "sync", "--json", cwd=ws)
    assert s["conflicts"] == [] and s["base_after"] == trunk
    assert git_out(ws, "status", "--porcelain", "--untracked-files=all") == ""  # clean: nothing lost, nothing left
    assert git_out(ws, "rev-parse", "HEAD").strip() == trunk
    tracked = set(git_out(ws, "ls-tree", "-r", "--name-only", trunk).split())
    on_disk = {str(p.relative_to(ws)) for p in ws.rglob("*")
               if p.is_file() and ".git" not in p.parts and ".lonca" not in p.parts}
    assert on_disk == tracked
    return s


def test_the_readme_loop_three_rounds(worker, source_repo, tmp_path):
    w = worker
    w.cli_json("init", "demo", "--import", str(source_repo))
    a, b = tmp_path / "ada", tmp_path / "bob"
    run(w, "session", "start", "--repo", "demo", "--agent", "ada", "--task", "billing", "--dir", str(a), "--json")
    run(w, "session", "start", "--repo", "demo", "--agent", "bob", "--task", "helpers", "--dir", str(b), "--json")
    fee, answer = "amount * 2", "return 42"
    for k in range(3, 6):
        mine = edit_round(w, a, "app.py#charge", "app.py", fee, f"amount * {k}", f"fee {k}")
        fee = f"amount * {k}"
        # ada syncs after her own change is integrated: her edit stays, the workspace is trunk
        s = synced(w, a, mine["trunk"])
        assert "app.py" in s["updated"] and fee in (a / "app.py").read_text()
        theirs = edit_round(w, b, "lib/util.py#helper", "lib/util.py", answer, f"return {40 + k}", f"helper {k}")
        answer = f"return {40 + k}"
        synced(w, b, theirs["trunk"])
        s = synced(w, a, theirs["trunk"])  # bob's change on another file comes in
        assert s["updated"] == ["lib/util.py"]
        assert fee in (a / "app.py").read_text() and answer in (a / "lib" / "util.py").read_text()
        assert fee in (b / "app.py").read_text()
    assert (a / "app.py").stat().st_mode & 0o111  # the executable bit trunk has stayed
