"""Bounded checks: exit codes, timeouts that kill the whole group, byte caps, a cleared
environment, the candidate tree as cwd; attestations and evidence in the seed's shapes."""
from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pygit2

from lonca.queue import (CheckSpec, attestations, checkout_tree, reasons,
                         run_check, verify_tree)
from lonca.queue.checks import DIE_WITH_WORKER, TAIL_BYTES

from queue_git import commit

PY = sys.executable


def _gone(pid: int) -> bool:
    """Whether the process has ended (a zombie waiting for its reaper counts as ended),
    giving it a moment after SIGKILL."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_pass_and_fail(tmp_path):
    ok = run_check([PY, "-c", "print('hello')"], tmp_path, [], 30, 1 << 20)
    assert (ok.result, ok.exit, ok.timed_out, ok.output) == ("pass", 0, False, b"hello\n")
    bad = run_check([PY, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], tmp_path, [], 30, 1 << 20)
    assert (bad.result, bad.exit, bad.output, bad.error) == ("fail", 3, b"boom", None)


def test_missing_program_is_an_error(tmp_path):
    run = run_check(["/nonexistent/lonca-check"], tmp_path, [], 5, 1024)
    assert run.result == "error" and run.exit is None and "could not start" in run.error


def test_a_program_is_found_in_the_tree_or_on_path(tmp_path):
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\necho tree\n")
    script.chmod(0o755)
    assert run_check(["./check.sh"], tmp_path, [], 30, 1024).output == b"tree\n"
    assert run_check(["sh", "-c", "echo path"], tmp_path, [], 30, 1024).output == b"path\n"
    script.chmod(0o644)
    run = run_check(["./check.sh"], tmp_path, [], 30, 1024)
    assert run.result == "error" and run.exit is None and "could not start './check.sh'" in run.error


def test_the_check_dies_with_the_process_that_started_it(tmp_path):
    """A SIGKILL of the process running a check (the worker) takes the check along: its death
    signal, set by setpriv before the exec (Python code between fork and exec, a preexec_fn, is
    unsafe in the worker's threaded process)."""
    assert DIE_WITH_WORKER, "setpriv (util-linux) is missing: checks would outlive a killed worker"
    pidfile = tmp_path / "check.pid"
    check = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    runner = subprocess.Popen([PY, "-c", "import sys, threading; from pathlib import Path; from lonca.queue import run_check; "
                               "t = threading.Thread(target=run_check, args=(sys.argv[1:], Path('.'), [], 60, 1024)); "
                               "t.start(); t.join()", PY, "-c", check], cwd=tmp_path)
    try:
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        assert Path(f"/proc/{pid}").exists()  # running
    finally:
        runner.kill()
        runner.wait()
    gone = _gone(pid)
    if not gone:
        os.kill(pid, signal.SIGKILL)
    assert gone, "the check outlived the process that started it"


def test_no_preexec_fn():
    """Python documents preexec_fn as unsafe in a process with threads: none in Lonca's code."""
    root = Path(__file__).resolve().parents[2]
    found = [f"{path.relative_to(root)}:{node.lineno}"
             for folder in ("lonca", "service", "queue", "symbols", "console") for path in (root / folder).rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and any(k.arg == "preexec_fn" for k in node.keywords)]
    assert not found, found


def test_no_shell_and_cwd_is_the_tree(tmp_path):
    (tmp_path / "marker").write_text("here")
    run = run_check([PY, "-c", "import os,sys; print(open('marker').read(), sys.argv[1])", "$HOME;echo"],
                    tmp_path, [], 30, 1 << 20)
    assert run.output == b"here $HOME;echo\n"


def test_environment_is_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv("LONCA_SECRET_FOR_TEST", "s3cret")
    monkeypatch.setenv("LONCA_NAMED_FOR_TEST", "named")
    code = "import os; print(sorted(os.environ))"
    run = run_check([PY, "-c", code], tmp_path, ["LONCA_NAMED_FOR_TEST", "LONCA_UNSET_FOR_TEST"], 30, 1 << 20)
    names = eval(run.output)
    assert "LONCA_SECRET_FOR_TEST" not in names
    assert set(names) - {"LC_CTYPE"} == {"PATH", "LONCA_NAMED_FOR_TEST"}  # Python may set LC_CTYPE itself


def test_timeout_kills_the_group_and_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    # the check starts a grandchild that would outlive it, then sleeps past its timeout
    code = ("import subprocess,sys,time;"
            f"p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(str(p.pid));"
            "time.sleep(60)")
    t0 = time.monotonic()
    run = run_check([PY, "-c", code], tmp_path, [], 1.5, 1 << 20)
    assert time.monotonic() - t0 < 10
    assert run.result == "error" and run.timed_out and run.exit is None
    assert "timed out" in run.error
    assert _gone(int(pidfile.read_text()))


def test_background_child_does_not_outlive_a_finished_check(tmp_path):
    pidfile = tmp_path / "bg.pid"
    code = ("import subprocess,sys;"
            "p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)'],"
            "stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL);"
            f"open({str(pidfile)!r},'w').write(str(p.pid)); print('done')")
    t0 = time.monotonic()
    run = run_check([PY, "-c", code], tmp_path, [], 30, 1 << 20)
    assert run.result == "pass" and run.output == b"done\n"
    assert time.monotonic() - t0 < 10
    assert _gone(int(pidfile.read_text()))


def test_output_over_the_cap_is_cut_and_reported(tmp_path):
    code = "import sys\nwhile True: sys.stdout.write('x' * 4096); sys.stdout.flush()"
    run = run_check([PY, "-c", code], tmp_path, [], 30, 100_000)
    assert run.result == "error" and run.overflowed and run.log_truncated
    assert "over 100000 bytes" in run.error
    assert len(run.output) <= TAIL_BYTES
    [att] = attestations(pygit2.init_repository(str(tmp_path / "r.git"), bare=True), _result(run), "0" * 40)
    assert att["details"]["output_over_cap"] == "true"


def test_long_output_under_the_cap_keeps_the_tail(tmp_path):
    code = "import sys\nfor i in range(20000): print(f'line {i}')"
    run = run_check([PY, "-c", code], tmp_path, [], 30, 10 << 20)
    assert run.result == "pass" and run.log_truncated and not run.overflowed
    assert len(run.output) == TAIL_BYTES
    assert run.output.endswith(b"line 19999\n")


def _result(run):
    from lonca.queue import CheckResult
    return CheckResult(CheckSpec("tests", tuple(run.argv), 30), [run])


def _tree_repo(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    c = commit(repo, {"a.txt": b"A\n", "dir/b.txt": b"B\n"}, [])
    return repo, c


def test_checkout_writes_the_tree(tmp_path):
    repo, c = _tree_repo(tmp_path)
    assert checkout_tree(repo, c, tmp_path / "out") == 2
    assert (tmp_path / "out/dir/b.txt").read_bytes() == b"B\n"
    assert not (tmp_path / "out/.git").exists()


def test_verify_tree_runs_in_order_retries_and_stops(tmp_path):
    repo, c = _tree_repo(tmp_path)
    flaky = tmp_path / "flaky"
    specs = [
        CheckSpec("build", (PY, "-c", "import os; assert open('dir/b.txt').read() == 'B\\n'"), 30),
        CheckSpec("tests", (PY, "-c", f"import os,sys; p={str(flaky)!r}\n"
                                      "if not os.path.exists(p): open(p,'w').close(); sys.exit(1)"), 30, attempts=2),
        CheckSpec("lint", (PY, "-c", "import sys; sys.exit(2)"), 30),
        CheckSpec("extended", (PY, "-c", "pass"), 30),
    ]
    results = verify_tree(repo, c, specs)
    assert [r.result for r in results] == ["pass", "pass", "fail", "skipped"]
    assert len(results[1].runs) == 2
    # each attempt is its own attestation, with its own tail; the pass on the retry is flaky
    tree = str(repo[c].tree_id)
    first, second = attestations(repo, results[1], tree)
    assert (first["result"], second["result"]) == ("fail", "pass")
    assert (first["details"]["attempt"], second["details"]["attempt"], second["details"]["attempts"]) == ("1", "2", "2")
    assert second["details"]["flaky"] == "true" and "flaky" not in first["details"]
    assert "flaky" not in attestations(repo, results[0], tree)[0]["details"]
    [skipped] = attestations(repo, results[3], tree)
    assert skipped["result"] == "skipped" and skipped["log"] is None
    assert reasons(results, ["build", "tests", "lint", "extended"]) == ["verification_failed:lint"]
    assert reasons(results[:2], ["build", "tests", "fuzz"]) == ["verification_missing:fuzz"]
    assert reasons(results[:2], ["build", "tests"]) == []


def test_attestation_shape(tmp_path):
    repo, c = _tree_repo(tmp_path)
    tree = str(repo[c].tree_id)
    [res] = verify_tree(repo, c, [CheckSpec("lint", (PY, "-c", "print('ok')"), 30)])
    [att] = attestations(repo, res, tree)
    log_id = att["log"]
    assert repo[log_id].data == b"ok\n"
    assert set(att) == {"check", "result", "subject_tree", "details", "env", "log", "producer"}
    assert (att["check"], att["result"], att["subject_tree"], att["log"]) == ("named", "pass", tree, log_id)
    assert att["details"]["name"] == "lint" and att["details"]["exit"] == "0"
    assert all(isinstance(v, str) for v in att["details"].values())
    assert len(att["env"]) == 64


def test_closing_the_pipes_early_is_not_the_end(tmp_path):
    # coreutils close stdout before they exit: the check is over only when the process is
    code = "import os, sys, time; print('x', flush=True); os.close(1); os.close(2); time.sleep(0.5); sys.exit(4)"
    run = run_check([PY, "-c", code], tmp_path, [], 30, 1 << 20)
    assert (run.result, run.exit, run.output) == ("fail", 4, b"x\n")
