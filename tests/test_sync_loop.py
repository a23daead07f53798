"""`lonca sync` never loses work (issue 11), through the real CLI and a real worker.

- The README's agent loop as a newcomer walks it: session start, lease, edit, propose, wait with
  `lonca events`, sync, edit again, propose; three rounds, another agent's change integrated in
  between. After each sync the workspace is trunk exactly (`git status` clean, nothing lost) and
  the next proposal holds only the new edit.
- Every kind of local change survives a sync, trunk's file-to-folder change comes in, and a sync
  that fails half-way (a write, then git) leaves the workspace as it was.
- A sync killed half-way is undone by the next command that reads the local changes."""
import json
import os
import signal
import subprocess
import sys
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


def wait_integrated(w, ws, change, timeout=30) -> dict:
    """Follow `lonca events` in the workspace until the change is integrated, as the README does;
    then trunk and the change as status shows them."""
    deadline, start = time.time() + timeout, 1
    while time.time() < deadline:
        ev = run(w, "events", "--from", str(start), "--json", cwd=ws)
        start = ev["next"]
        mine = [e for e in ev["events"] if e.get("change") == change]
        assert not any(e["kind"] in ("conflicted", "failed", "rejected", "withdrawn") for e in mine), mine
        if any(e["kind"] == "integrated" for e in mine):
            st = run(w, "status", "--json")
            return {"trunk": st["trunk"], "change": next(c for c in st["changes"] if c["change"] == change)}
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
    done = wait_integrated(w, ws, p["change"])
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


def git_in(cwd, *args):
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def many_files(tmp_path):
    """A source repository with a file for each kind of local change sync must keep."""
    src = tmp_path / "many"
    src.mkdir()
    git_in(src, "init", "-q", "-b", "main")
    files = {"app.py": "def charge(amount):\n    return amount * 2\n",
             "notes.txt": "keep me\n", "README.md": "# Demo\n\n## Install\n\nRun it.\n",
             "gone.py": "def gone():\n    return 1\n", "tool.sh": "echo one\necho two\necho three\n",
             "conf": "a = 1\n", ".gitignore": "build/\n", "old.txt": "a file\n", "lib/util.py": "def helper():\n    return 42\n"}
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    git_in(src, "add", ".")
    git_in(src, "commit", "-qm", "first")
    return src


def snapshot(ws) -> dict:
    """Every file of the workspace but git's own, with its mode; HEAD and the recorded base."""
    files = {str(p.relative_to(ws)): (p.read_bytes(), p.stat().st_mode & 0o777) for p in ws.rglob("*")
             if p.is_file() and ".git" not in p.parts and ".lonca" not in p.parts}
    meta = json.loads((ws / ".lonca" / "workspace.json").read_text())
    return {"files": files, "head": git_out(ws, "rev-parse", "HEAD"), "base": meta["base"],
            "status": git_out(ws, "status", "--porcelain", "--untracked-files=all")}


def test_sync_keeps_every_kind_of_local_change_and_undoes_a_failed_write(worker, many_files, tmp_path):
    w = worker
    w.cli_json("init", "demo", "--import", str(many_files))
    a, b, c = tmp_path / "ada", tmp_path / "bob", tmp_path / "cy"
    for name, ws in (("ada", a), ("bob", b), ("cy", c)):
        run(w, "session", "start", "--agent", name, "--dir", str(ws), "--json")
    # bob: one change touching every kind of path, integrated
    run(w, "lease", "acquire", "app.py#charge", "gone.py#gone", "gone.py#<file>", "added.py#<file>", "tool.sh#<file>",
        "pkg/sub/new.py#<file>", "build#<file>", "old.txt#<file>", "old.txt/inner.txt#<file>", "--intent", "a bit of everything", "--json", cwd=b)
    (b / "app.py").write_text("def charge(amount):\n    return amount * 3\n")
    (b / "gone.py").unlink()
    (b / "added.py").write_text("def added():\n    return 'bob'\n")
    (b / "tool.sh").write_text("echo one\necho two\necho three\necho four\n")
    (b / "pkg" / "sub").mkdir(parents=True)
    (b / "pkg" / "sub" / "new.py").write_text("def new():\n    return 0\n")
    (b / "build").write_text("not a folder\n")
    (b / "old.txt").unlink()
    (b / "old.txt").mkdir()
    (b / "old.txt" / "inner.txt").write_text("now a folder\n")  # trunk replaces a file by a folder
    p = run(w, "propose", "-m", "a bit of everything", "--json", cwd=b)
    assert p["status"] == "queued", p
    trunk = wait_integrated(w, b, p["change"])["trunk"]

    # ada: local changes of each kind, none proposed
    (a / "notes.txt").write_text("keep me, edited\n")               # trunk left it alone
    (a / "gone.py").write_text("def gone():\n    return 2\n")        # trunk deleted it
    (a / "added.py").write_text("def added():\n    return 'ada'\n")  # trunk added it, other content
    (a / "tool.sh").chmod(0o755)                                      # the executable bit, trunk edited it
    (a / "deep" / "new").mkdir(parents=True)
    (a / "deep" / "new" / "file.py").write_text("x = 1\n")           # a file in new folders
    (a / "conf").unlink()
    (a / "conf").mkdir()
    (a / "conf" / "main.toml").write_text("a = 2\n")                 # a file replaced by a folder
    untouched = {p: (a / p).stat() for p in ("README.md", "notes.txt", "lib/util.py")}
    s = run(w, "sync", "--json", cwd=a)
    assert s["base_after"] == trunk
    assert sorted(x["path"] for x in s["conflicts"]) == ["added.py", "gone.py"]
    for p, st in untouched.items():  # trunk and ada agree, or trunk left it alone: not even rewritten
        assert ((a / p).stat().st_ino, (a / p).stat().st_mtime_ns) == (st.st_ino, st.st_mtime_ns), p
    assert (a / "notes.txt").read_text() == "keep me, edited\n"
    assert "return 2" in (a / "gone.py").read_text()
    added = (a / "added.py").read_text()
    assert "'ada'" in added and "'bob'" in added and "<<<<<<< local" in added
    assert (a / "tool.sh").read_text().endswith("echo four\n") and (a / "tool.sh").stat().st_mode & 0o100
    assert (a / "deep" / "new" / "file.py").read_text() == "x = 1\n"
    assert (a / "conf" / "main.toml").read_text() == "a = 2\n"
    assert "amount * 3" in (a / "app.py").read_text() and (a / "pkg" / "sub" / "new.py").exists()
    assert (a / "build").read_text() == "not a folder\n"
    assert (a / "old.txt" / "inner.txt").read_text() == "now a folder\n"
    status = set(git_out(a, "status", "--porcelain", "--untracked-files=all").splitlines())
    assert status == {" M notes.txt", "?? gone.py", " M added.py", " M tool.sh", "?? deep/new/file.py",
                      " D conf", "?? conf/main.toml"}

    # cy: trunk's new file `build` meets a folder of ignored files, so the write fails half-way;
    # the workspace is put back as it was, then syncs once the folder is gone
    (c / "README.md").write_text("# Demo, by cy\n")
    (c / "build").mkdir()
    (c / "build" / "out.bin").write_bytes(b"\x00\x01")
    before = snapshot(c)
    failed = w.cli("sync", "--json", cwd=c)
    assert failed.returncode == 3 and failed.stdout == "" and "as it was before the sync" in failed.stderr
    assert snapshot(c) == before and not (c / ".lonca" / "sync-backup.json").exists()
    (c / "build" / "out.bin").unlink()
    (c / "build").rmdir()
    before = snapshot(c)
    (c / ".git" / "index.lock").write_text("")  # another git runs: every file is written, then git fails
    failed = w.cli("sync", "--json", cwd=c)
    assert failed.returncode == 3 and "index.lock" in failed.stderr and "as it was before the sync" in failed.stderr
    assert snapshot(c) == before and not (c / ".lonca" / "sync-backup.json").exists()
    (c / ".git" / "index.lock").unlink()
    s = run(w, "sync", "--json", cwd=c)
    assert s["base_after"] == trunk and s["conflicts"] == []
    assert git_out(c, "status", "--porcelain", "--untracked-files=all") == " M README.md\n"


def test_a_sync_killed_half_way_is_undone_by_the_next_read(worker, source_repo, tmp_path):
    """SIGKILL while git moves the base, after sync wrote trunk's files: the next command that reads
    the local changes (here the read-only preview tool) puts the workspace back first, so trunk's
    files are never taken for the agent's edits; the next sync then lands as if nothing happened."""
    w = worker
    w.cli_json("init", "demo", "--import", str(source_repo))
    b, c = tmp_path / "bob", tmp_path / "cy"
    run(w, "session", "start", "--agent", "bob", "--dir", str(b), "--json")
    run(w, "session", "start", "--agent", "cy", "--dir", str(c), "--json")
    run(w, "lease", "acquire", "app.py#charge", "docs/new/guide.md#<file>", "--intent", "x", "--json", cwd=b)
    (b / "app.py").write_text((b / "app.py").read_text().replace("amount * 2", "amount * 5"))
    (b / "docs" / "new").mkdir(parents=True)
    (b / "docs" / "new" / "guide.md").write_text("# Guide\n")
    trunk = wait_integrated(w, b, run(w, "propose", "-m", "x", "--json", cwd=b)["change"])["trunk"]

    (c / "README.md").write_text("# Demo, by cy\n")
    before = snapshot(c)
    # git asks this fsmonitor hook on each index refresh; it blocks while a sync's backup exists,
    # that is in `git reset` after every file is written, and says where it is
    mark, hook = tmp_path / "blocked", tmp_path / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\nif [ -e .lonca/sync-backup.json ]; then touch {mark}; sleep 60; fi\nexit 1\n")
    hook.chmod(0o755)
    git_in(c, "config", "core.fsmonitor", str(hook))
    proc = subprocess.Popen([sys.executable, "-m", "lonca", "sync", "--json"], cwd=c, env=w.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while not mark.exists():
        assert proc.poll() is None and time.time() < deadline, "sync never reached git reset"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    git_in(c, "config", "--unset", "core.fsmonitor")
    (c / ".git" / "index.lock").unlink(missing_ok=True)  # git's own lock, left by the kill
    assert "amount * 5" in (c / "app.py").read_text()  # half-way: trunk's files stand as if local edits
    assert (c / ".lonca" / "sync-backup.json").exists()

    res = subprocess.run([sys.executable, "-m", "lonca", "--mode", "json", "call", "lonca:change:preview"], cwd=c,
                         env=w.env, input="{}", capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    facts = json.loads(res.stdout)[0]["payload"]["data"]["output"]["facts"]
    assert facts["modified_files"] == ["README.md"] and facts["added_files"] == []
    assert snapshot(c) == before and not (c / ".lonca" / "sync-backup.json").exists()

    s = run(w, "sync", "--json", cwd=c)
    assert s["base_after"] == trunk and s["conflicts"] == []
    assert git_out(c, "status", "--porcelain", "--untracked-files=all") == " M README.md\n"
    assert (c / "docs" / "new" / "guide.md").read_text() == "# Guide\n" and "amount * 5" in (c / "app.py").read_text()
