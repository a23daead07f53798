"""Check runners on Celery over the machine's RabbitMQ: real `lonca runner` processes, a real
worker whose policy says [queue] runner = "celery". The runners get a cleared environment, a home
and a folder of their own, and nothing of the worker's (no LONCA_HOME, no token, no key): the tree
comes in the job. (They run as the same user: this machine's Python lives under /root, which no
other user can run.)"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pygit2
import pytest

from helpers import acquire, propose
from test_leases import wait_status

CHECK = ("import os, sys, time, pathlib; time.sleep({delay}); "
         "bad = [str(p) for p in pathlib.Path('.').rglob('*.py') if 'BAD' in p.read_text()]; "
         "print('runner pid', os.getppid(), 'home' if 'LONCA_HOME' in os.environ else 'no home', 'bad:', bad); "
         "sys.exit(1 if bad else 0)")


def _broker_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        return True
    except OSError:
        return False


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def runners(tmp_path):
    if not _broker_up():
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ is not at 127.0.0.1:5672: CI must start it before the tests")
        pytest.skip("RabbitMQ is not at 127.0.0.1:5672")
    started: list[subprocess.Popen] = []

    def start(name: str, concurrency: int = 2) -> subprocess.Popen:
        home = tmp_path / f"runner-{name}"
        home.mkdir()
        out = open(home / "out.txt", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "lonca", "runner", "--concurrency", str(concurrency)],
                                cwd=home, env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        deadline = time.time() + 90
        while b" ready." not in (home / "out.txt").read_bytes():
            assert proc.poll() is None and time.time() < deadline, (home / "out.txt").read_text()
            time.sleep(0.2)
        return proc
    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _policy(env, delay, runners=1):
    argv = json.dumps(["python3", "-c", CHECK.format(delay=delay)])
    env.policy(f'[verification]\ntests = {argv}\nbatch_size = 8\n[queue]\nrunner = "celery"\nrunners = {runners}\n')


def test_runners_verify_lanes_and_each_verdict_names_its_runner(repo_env, runners):
    env = repo_env
    procs = [runners("a"), runners("b")]
    _policy(env, 0.5, runners=3)
    c = env.client
    base = env.status()["trunk"]
    changes = []
    for i in range(6):
        t = env.agent(f"agent{i}")["token"]
        acquire(c, t, f"lib/r{i}.py#<file>")
        body = f"def r{i}():\n    return {'BAD' if i == 4 else i}\n"
        changes.append((propose(c, t, base, {f"lib/r{i}.py": body})["change"], t))
    for i, (cid, t) in enumerate(changes):
        got = wait_status(c, t, cid, "rejected" if i == 4 else "integrated", timeout=120)
        [ev] = got["evidence"]
        assert ev["details"]["runner"].startswith("celery:")
        assert "no home" in ev["log"] and f"runner pid {env.w.proc.pid}" not in ev["log"]
        assert (ev["result"] == "fail") == (i == 4)
    ran = {e["details"]["runner"].split(":")[2] for x in env.log() for e in x["entry"]["evidence"]}
    assert ran <= {str(p.pid) for p in procs} | {str(q) for p in procs for q in _children(p.pid)}
    res = env.w.cli("audit", "verify", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["logs"][0]["checked_landings"] >= 1


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def test_a_runner_killed_mid_check_loses_nothing_and_lands_nothing_twice(repo_env, runners):
    env = repo_env
    first = runners("first", concurrency=1)
    _policy(env, 4)
    c = env.client
    a = env.agent()["token"]
    acquire(c, a, "lib/killed.py#<file>")
    res = propose(c, a, env.status()["trunk"], {"lib/killed.py": "def k():\n    return 1\n"})
    deadline = time.time() + 60
    while not [q for q in _children(first.pid) if _children(q)]:     # the check is running on it
        assert time.time() < deadline
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    runners("second", concurrency=1)            # the job goes back to the queue and runs here
    got = wait_status(c, a, res["change"], "integrated", timeout=120)
    assert got["evidence"][0]["result"] == "pass"
    landed = [e for e in env.log() if e["entry"]["op"]["op"] == "change.integrate" and e["entry"]["op"]["change"] == res["change"]]
    assert len(landed) == 1
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))
    assert str(store.references["refs/heads/main"].target) == got["status"]["commit"]


def test_four_runners_a_queue_with_conflicts_and_failures_and_the_log_replays(repo_env, runners):
    from test_leases import APP
    env = repo_env
    procs = [runners(f"r{i}", concurrency=1) for i in range(4)]
    _policy(env, 0.3, runners=4)
    c = env.client
    base = env.status()["trunk"]
    # two changes of one symbol on one base: the second conflicts once the first is in
    x, y = env.agent("x")["token"], env.agent("y")["token"]
    lx = acquire(c, x, "app.py#charge")
    first = propose(c, x, base, {"app.py": APP.replace("amount * 2", "amount * 3")})
    wait_status(c, x, first["change"], "integrated", timeout=120)
    c.call("lease.release", {"set": lx["set"]}, token=x)
    acquire(c, y, "app.py#charge")
    late = propose(c, y, base, {"app.py": APP.replace("amount * 2", "amount + 1")})
    # and twenty independent ones, two of them failing their check
    changes = []
    for i in range(20):
        t = env.agent(f"agent{i}")["token"]
        acquire(c, t, f"lib/q{i}.py#<file>")
        body = f"def q{i}():\n    return {'BAD' if i in (6, 15) else i}\n"
        changes.append((propose(c, t, base, {f"lib/q{i}.py": body})["change"], t))
    assert wait_status(c, y, late["change"], "conflicted", timeout=120)["status"]["symbols"] == ["app.py#charge"]
    for i, (cid, t) in enumerate(changes):
        got = wait_status(c, t, cid, "rejected" if i in (6, 15) else "integrated", timeout=180)
        if i in (6, 15):
            assert f"lib/q{i}.py" in got["evidence"][0]["log"]      # its own log
    entries = env.log()
    landed = [ch for e in entries if e["entry"]["op"]["op"] in ("change.integrate", "change.integrate_batch")
              and e["entry"]["decision"]["outcome"] == "allow"
              for ch in ([e["entry"]["op"]["change"]] if e["entry"]["op"]["op"] == "change.integrate"
                         else [m[0] for m in e["entry"]["op"]["merged"]])]
    assert len(landed) == len(set(landed)) == 19                   # every passing change once
    res = env.w.cli("audit", "verify", "--json")                   # each trunk tree on its own checks
    assert res.returncode == 0 and json.loads(res.stdout)["logs"][0]["trees_compared"]
    runners_seen = {a["details"]["runner"] for e in entries for a in e["entry"]["evidence"]}
    assert len(runners_seen) >= 2 and all(r.startswith("celery:") for r in runners_seen)
    before = env.status()
    env.w.stop()
    env.w.start()
    c2 = env.w.client().connect()
    try:
        after = c2.call("status", {}, repo="demo", token=env.token)
    finally:
        c2.close()
    for k in ("trunk", "queue", "next_seq", "head_hash", "changes", "flaky"):
        assert after[k] == before[k], k
    assert all(p.poll() is None for p in procs)
