"""The merge queue inside the worker: integrations, conflicts, batches with a failing check, and a
crash in the middle of an integration. Real worker, real git store, real check processes."""
import os
import signal
import time

import pygit2
import pytest

from helpers import acquire, propose
from test_leases import APP, wait_status

CHECK = ("import sys, time, pathlib; time.sleep({delay}); "
         "bad = [str(p) for p in pathlib.Path('.').rglob('*.py') if 'BAD' in p.read_text()]; "
         "print('checked', len(list(pathlib.Path('.').rglob('*.py'))), 'files; bad:', bad); sys.exit(1 if bad else 0)")


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def env(repo_env):
    return repo_env


def store_trunk(worker) -> str:
    return str(pygit2.Repository(str(worker.home / "repos" / "demo.git")).references["refs/heads/main"].target)


def test_conflict_on_the_same_function(env):
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    base = env.status()["trunk"]
    la = acquire(c, a, "app.py#charge")
    first = propose(c, a, base, {"app.py": APP.replace("amount * 2", "amount * 3")})
    wait_status(c, a, first["change"], "integrated")
    c.call("lease.release", {"set": la["set"]}, token=a)
    acquire(c, b, "app.py#charge")
    late = propose(c, b, base, {"app.py": APP.replace("amount * 2", "amount + 1")})  # on the old base
    assert late["decision"]["outcome"] == "allow"
    got = wait_status(c, b, late["change"], "conflicted")
    assert got["status"]["symbols"] == ["app.py#charge"]
    assert got["integrate_decision"]["reasons"] == ["conflict:app.py#charge"]
    assert {"kind": "conflicted", "seq": got["integrate_seq"], "change": late["change"], "conflicts": ["app.py#charge"]} \
        in c.call("events", {"from": 1}, token=b)["events"]
    assert store_trunk(env.w) == env.status()["trunk"]


def test_a_failing_check_rejects_only_the_culprit_of_a_batch(env):
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\nbatch_size = 8\n' % CHECK.format(delay=1.2).replace('"', '\\"'))
    c = env.client
    base = env.status()["trunk"]
    first = env.agent("first")["token"]
    acquire(c, first, "lib/first.py#<file>")
    head = propose(c, first, base, {"lib/first.py": "def first():\n    return 1\n"})
    time.sleep(0.3)  # the queue is verifying `head` alone; the next eight wait and form one batch
    changes = []
    for i in range(8):
        t = env.agent(f"agent{i}")["token"]
        acquire(c, t, f"lib/f{i}.py#<file>")
        body = f"def f{i}():\n    return {'BAD' if i == 5 else i}\n"
        changes.append((propose(c, t, base, {f"lib/f{i}.py": body})["change"], t))
    wait_status(c, first, head["change"], "integrated")
    culprit = wait_status(c, changes[5][1], changes[5][0], "rejected", timeout=60)
    assert culprit["status"]["reasons"] == ["verification_failed:tests"]
    ev = culprit["evidence"][0]
    assert set(ev) == {"check", "result", "exit", "duration_ms", "attempts", "sandbox", "error",
                       "details", "log", "log_truncated"}
    assert ev["check"] == "tests" and ev["result"] == "fail" and ev["exit"] == 1 and "lib/f5.py" in ev["log"]
    for i, (cid, t) in enumerate(changes):
        if i != 5:
            got = wait_status(c, t, cid, "integrated", timeout=60)
            assert got["evidence"][0]["result"] == "pass"
    ops = [e["entry"]["op"]["op"] for e in env.log()]
    assert "change.integrate_batch" in ops
    batch = next(e["entry"] for e in env.log() if e["entry"]["op"]["op"] == "change.integrate_batch")
    assert [m[0] for m in batch["op"]["merged"]] == [cid for cid, _ in changes[:5]]  # the good prefix landed at once
    assert store_trunk(env.w) == env.status()["trunk"]
    assert env.w.cli("audit", "verify").returncode == 0


def test_crash_in_the_middle_of_an_integration(env):
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % CHECK.format(delay=3).replace('"', '\\"'))
    c = env.client
    a = env.agent()["token"]
    acquire(c, a, "app.py#charge")
    res = propose(c, a, env.status()["trunk"], {"app.py": APP.replace("amount * 2", "amount * 9")})
    time.sleep(1.0)  # verifying now
    os.kill(env.w.proc.pid, signal.SIGKILL)
    env.w.proc.wait()
    c.close()
    env.w.start()
    c = env.w.client().connect()
    got = wait_status(c, a, res["change"], "integrated", timeout=30)
    log = c.call("log", {"from": 1}, repo="demo", token=env.token)
    integrations = [e for e in log if e["entry"]["op"]["op"] == "change.integrate" and e["entry"]["op"].get("change") == res["change"]]
    assert len(integrations) == 1 and integrations[0]["entry"]["op"]["merged"] == got["status"]["commit"]
    assert store_trunk(env.w) == got["status"]["commit"]
    assert env.w.cli("audit", "verify").returncode == 0
    # a crash after the entry but before the ref moved: the start puts the ref back where the log says
    env.w.stop()
    repo = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))
    repo.references.create("refs/heads/main", repo[got["status"]["commit"]].parents[0].id, force=True)
    env.w.start()
    assert store_trunk(env.w) == got["status"]["commit"]
    c.close()


def test_quota_of_the_day(env):
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n[quota]\nday_seconds = 1\n' % CHECK.format(delay=1.1).replace('"', '\\"'))
    c = env.client
    a = env.agent()["token"]
    acquire(c, a, "app.py#<file>")
    first = propose(c, a, env.status()["trunk"], {"app.py": APP.replace("amount * 2", "amount * 4")})
    got = wait_status(c, a, first["change"], "integrated", timeout=30)
    assert int(got["evidence"][0]["duration_ms"]) >= 1000
    assert env.status()["verification_day_ms"] >= 1000
    second = propose(c, a, env.status()["trunk"], {"app.py": APP.replace("amount * 2", "amount * 5")})
    assert second["decision"]["outcome"] == "deny" and "verification_quota:day" in second["decision"]["reasons"]


def test_a_worker_killed_leaves_no_kept_checkout_to_the_next(env, tmp_path):
    """Kept checkouts are removed by the worker's stop; one killed with SIGKILL never stops, so
    the next worker removes the folders named for a pid that no longer runs, and only those."""
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % CHECK.format(delay=3).replace('"', '\\"'))
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    live = tmp / f"lonca-slot-{os.getpid()}-live"     # this test's own pid: a live process's folder
    (live / "tree").mkdir(parents=True)
    env.w.stop()
    env.w.env["TMPDIR"] = str(tmp)
    env.w.start()
    c = env.w.client().connect()
    a = env.agent()["token"]
    acquire(c, a, "app.py#charge")
    propose(c, a, env.status()["trunk"], {"app.py": APP.replace("amount * 2", "amount * 9")})
    killed = env.w.proc.pid
    deadline = time.monotonic() + 20
    while not list(tmp.glob(f"lonca-slot-{killed}-*/tree/app.py")) and time.monotonic() < deadline:
        time.sleep(0.1)     # the check is running in the slot's checkout
    left = list(tmp.glob(f"lonca-slot-{killed}-*"))
    assert left, "the worker kept no checkout named for its pid"
    os.kill(killed, signal.SIGKILL)
    env.w.proc.wait()
    c.close()
    assert all(p.exists() for p in left)
    env.w.start()
    deadline = time.monotonic() + 20    # the sweep runs on a thread once the worker answers
    while any(p.exists() for p in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(p.exists() for p in left)
    assert (live / "tree").is_dir()
