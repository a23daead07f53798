"""Check runners on Celery over the machine's RabbitMQ: real `lonca runner` processes, a real
worker whose policy says [queue] runner = "celery". The runners get a cleared environment, a home
and a folder of their own, and nothing of the worker's (no LONCA_HOME, no token, no key): the tree
comes in the job. They run as nobody, from the copy of the project's Python that `make runner-python` makes under
/var/tmp (this machine's Python lives under /root, which nobody can run), so the worker's LONCA_HOME, under
pytest's tmp_path (0700), is closed to them: every check tries to read the worker's database and
says what it got. The broker restart runs on a RabbitMQ node of its own (`private_broker`):
the machine's is shared by every test and session."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2
import pytest

from forge import free_port
from helpers import acquire, propose
from test_leases import wait_status

CHECK = ("import os, sys, time, pathlib\n"
         "try:\n    open({secret!r}).close(); worker = 'read'\nexcept OSError as e:\n    worker = type(e).__name__\n"
         "time.sleep({delay}); "
         "bad = [str(p) for p in pathlib.Path('.').rglob('*.py') if 'BAD' in p.read_text()]; "
         "print('runner pid', os.getppid(), 'home' if 'LONCA_HOME' in os.environ else 'no home', "
         "'worker home:', worker, 'bad:', bad); "
         "sys.exit(1 if bad else 0)")
NOBODY = 65534      # the runners' user and group


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
def runners(any_runners):
    """Runners on the machine's RabbitMQ."""
    if not _broker_up():
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ is not at 127.0.0.1:5672: CI must start it before the tests")
        pytest.skip("RabbitMQ is not at 127.0.0.1:5672")
    return any_runners


@pytest.fixture
def any_runners(tmp_path):
    """`lonca runner` processes as nobody on the broker each is given (the machine's by default),
    with the Python and code `make test` copied under /var/tmp (LONCA_RUNNER_CODE, the Makefile's)."""
    code = Path(os.environ.get("LONCA_RUNNER_CODE") or "/nonexistent")
    python = code.parent / "bin" / "python"
    if os.geteuid() != 0 or not (code / "lonca").is_dir() or not os.access(python, os.X_OK):
        why = (f"runners run as nobody: that needs root and the runner's Python (make runner-python; "
               f"LONCA_RUNNER_CODE={code}, euid {os.geteuid()})")
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    started: list[subprocess.Popen] = []
    homes: list[str] = []

    def start(name: str, concurrency: int = 2, broker: str | None = None) -> subprocess.Popen:
        log = tmp_path / f"runner-{name}" / "out.txt"
        log.parent.mkdir()
        out = open(log, "wb")     # opened by root: the runner inherits it
        # its home outside tmp_path, whose 0700 is what keeps nobody out of the worker's LONCA_HOME
        home = tempfile.mkdtemp(prefix=f"lonca-runner-{name}-", dir="/var/tmp")
        homes.append(home)
        os.chown(home, NOBODY, NOBODY)
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "PYTHONPATH": str(code),
               "LD_LIBRARY_PATH": str(code.parent / "lib"),       # its libpython: the copy's run path is under /root
               **({"LONCA_CELERY_BROKER": broker} if broker else {})}
        proc = subprocess.Popen([str(python), "-m", "lonca", "runner", "--concurrency", str(concurrency)],
                                cwd=home, env=env, user=NOBODY, group=NOBODY, extra_groups=[],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        deadline = time.time() + 90
        while b" ready." not in log.read_bytes():
            assert proc.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.2)
        return proc
    yield start
    for proc in started:        # nobody's processes, which root may signal
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    for home in homes:
        shutil.rmtree(home)


def _policy(env, delay, runners=1):
    argv = json.dumps(["python3", "-c", CHECK.format(delay=delay, secret=str(env.w.home / "lonca.db"))])
    env.policy(f'[verification]\ntests = {argv}\nbatch_size = 8\n[queue]\nrunner = "celery"\nrunners = {runners}\n')


def _propose_modules(env, base, stem: str, n: int, bad: set[int]) -> list[tuple[str, str]]:
    """n agents each lease and propose a module of its own, lib/<stem><i>.py; those in `bad` hold
    BAD and fail the check. (change id, the agent's token), in order."""
    changes = []
    for i in range(n):
        t = env.agent(f"agent{i}")["token"]
        acquire(env.client, t, f"lib/{stem}{i}.py#<file>")
        body = f"def {stem}{i}():\n    return {'BAD' if i in bad else i}\n"
        changes.append((propose(env.client, t, base, {f"lib/{stem}{i}.py": body})["change"], t))
    return changes


def test_runners_verify_lanes_and_each_verdict_names_its_runner(repo_env, runners):
    env = repo_env
    procs = [runners("a"), runners("b")]
    _policy(env, 0.5, runners=3)
    c = env.client
    base = env.status()["trunk"]
    changes = _propose_modules(env, base, "r", 6, {4})
    assert (env.w.home / "lonca.db").is_file()      # what each check tried to read
    for i, (cid, t) in enumerate(changes):
        got = wait_status(c, t, cid, "rejected" if i == 4 else "integrated", timeout=120)
        [ev] = got["evidence"]
        assert ev["details"]["runner"].startswith("celery:")
        assert "no home" in ev["log"] and f"runner pid {env.w.proc.pid}" not in ev["log"]
        assert "worker home: PermissionError" in ev["log"]      # "read" by a runner as root
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
    changes = _propose_modules(env, base, "q", 20, {6, 15})
    assert wait_status(c, y, late["change"], "conflicted", timeout=120)["status"]["symbols"] == ["app.py#charge"]
    for i, (cid, t) in enumerate(changes):
        got = wait_status(c, t, cid, "rejected" if i in (6, 15) else "integrated", timeout=180)
        if i in (6, 15):
            assert f"lib/q{i}.py" in got["evidence"][0]["log"]      # its own log
    entries = env.log()
    landed = _landed(entries)
    assert len(landed) == len(set(landed)) == 19                   # every passing change once
    res = env.w.cli("audit", "verify", "--json")                   # each trunk tree on its own checks
    assert res.returncode == 0 and json.loads(res.stdout)["logs"][0]["trees_compared"]
    runners_seen = {a["details"]["runner"] for e in entries for a in e["entry"]["evidence"]}
    assert len(runners_seen) >= 2 and all(r.startswith("celery:") for r in runners_seen)
    _replays(env)
    assert all(p.poll() is None for p in procs)


def _landed(entries: list) -> list[str]:
    """The changes the log says landed, once for each time."""
    return [ch for e in entries if e["entry"]["op"]["op"] in ("change.integrate", "change.integrate_batch")
            and e["entry"]["decision"]["outcome"] == "allow"
            for ch in ([e["entry"]["op"]["change"]] if e["entry"]["op"]["op"] == "change.integrate"
                       else [m[0] for m in e["entry"]["op"]["merged"]])]


def _replays(env) -> None:
    """The worker restarted replays its log to the status it had."""
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


RABBIT_BIN = "/usr/lib/rabbitmq/bin"    # not /usr/sbin's wrappers, which run as the rabbitmq user, who can not write tmp_path


class PrivateBroker:
    """A RabbitMQ node of one test's own (its name, ports, data and cookie in tmp_path), which the
    test may stop and start again: the machine's node at 5672 is shared by every test and session."""

    def __init__(self, root):
        self.root = root
        self.node = f"lonca-{os.urandom(4).hex()}@localhost"
        self.port = free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        root.mkdir()
        (root / "rabbitmq.conf").write_text("loopback_users = none\n")
        (root / "enabled_plugins").write_text("[].\n")
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(root),      # its Erlang cookie is made there
                    "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_PORT": str(self.port),
                    "RABBITMQ_DIST_PORT": str(free_port()), "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
                    "RABBITMQ_LOG_BASE": str(root / "log"), "RABBITMQ_PID_FILE": str(root / "pid"),
                    "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"),
                    "RABBITMQ_ADVANCED_CONFIG_FILE": str(root / "advanced.config"),
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins")}
        self.proc: subprocess.Popen | None = None

    def ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([f"{RABBIT_BIN}/rabbitmqctl", "-n", self.node, *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        """On the same port and data folder every time."""
        self.proc = subprocess.Popen([f"{RABBIT_BIN}/rabbitmq-server"], env=self.env, cwd=self.root,
                                     stdout=open(self.root / "out.txt", "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 60
        # await_startup fails at once until the node has registered with epmd: tried again until then
        while self.ctl("await_startup", "--timeout", "60").returncode != 0:
            assert self.proc.poll() is None and time.time() < deadline, (self.root / "out.txt").read_text()[-3000:]
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.ctl("stop", timeout=30)
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def private_broker(tmp_path):
    if not os.access(f"{RABBIT_BIN}/rabbitmq-server", os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail(f"RabbitMQ is not installed ({RABBIT_BIN}/rabbitmq-server): CI must install rabbitmq-server")
        pytest.skip(f"RabbitMQ is not installed ({RABBIT_BIN}/rabbitmq-server)")
    broker = PrivateBroker(tmp_path / "rabbit")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def test_a_broker_restarted_mid_check_loses_nothing_and_lands_nothing_twice(make_worker, source_repo, monkeypatch,
                                                                            tmp_path, private_broker, any_runners):
    from helpers import RepoEnv
    w = make_worker({"LONCA_CELERY_BROKER": private_broker.url})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    env = RepoEnv(w, source_repo)
    try:
        procs = [any_runners(f"r{i}", concurrency=1, broker=private_broker.url) for i in range(2)]
        _policy(env, 3, runners=2)
        c = env.client
        base = env.status()["trunk"]
        changes = _propose_modules(env, base, "b", 4, {2})
        deadline = time.time() + 60
        while not [q for p in procs for q in _children(p.pid) if _children(q)]:    # a check is running
            assert time.time() < deadline
            time.sleep(0.1)
        # The broker restarts mid-check with the worker paused, and the worker goes on only once the
        # job, given again to a runner after the restart, has run and answered: an answer sent
        # before its worker is back on the broker, to a reply queue the restart did not keep, is
        # lost (what a worker slower to reconnect than a runner meets, made certain here)
        outs = [tmp_path / f"runner-r{i}" / "out.txt" for i in range(2)]
        seen = [len(o.read_bytes()) for o in outs]
        os.kill(w.proc.pid, signal.SIGSTOP)
        try:
            private_broker.stop()
            private_broker.start()
            deadline = time.time() + 60     # the restart's own time is not the check's
            while not any(re.search(rb"Connected to .* received.* succeeded in ", o.read_bytes()[n:], re.S)
                          for o, n in zip(outs, seen)):
                assert time.time() < deadline
                time.sleep(0.1)
        finally:
            os.kill(w.proc.pid, signal.SIGCONT)
        for i, (cid, t) in enumerate(changes):
            got = wait_status(c, t, cid, "rejected" if i == 2 else "integrated", timeout=120)
            assert (got["evidence"][0]["result"] == "fail") == (i == 2)
        landed = _landed(env.log())
        assert sorted(landed) == sorted(cid for i, (cid, _) in enumerate(changes) if i != 2)    # each once
        res = env.w.cli("audit", "verify", "--json")        # each trunk tree on its own passing checks
        assert res.returncode == 0 and json.loads(res.stdout)["logs"][0]["trees_compared"]
        _replays(env)
    finally:
        env.client.close()
