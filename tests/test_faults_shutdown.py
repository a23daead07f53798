"""Stopping the worker while a check runs (issue 16, "Shutdown"): SIGTERM stops it within seconds
and kills the check's group; SIGKILL takes the check's first process along (its death signal) and
the next start kills what was left in its group. Processes are read from /proc."""
import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

import pytest

from helpers import acquire, propose
from test_leases import APP

STOP_S = 10  # a graceful stop takes at most this


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def _procs(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `marker`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            out.append(int(pid))
    return out


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _start_long_check(env) -> tuple[str, list[int]]:
    """A policy whose check runs for minutes and starts a grandchild; a change that runs it.
    Returns the marker of its processes and their pids (leader first)."""
    marker = "lonca-check-" + secrets.token_hex(4)
    child = f"'import time; time.sleep(300)  # {marker}-grand' + 'child'"  # joined in the check: its own line differs
    code = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child}]); "
            f"time.sleep(300)  # {marker}-leader")
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % code.replace("\\", "\\\\").replace('"', '\\"'))
    a = env.agent()["token"]
    acquire(env.client, a, "app.py#charge")
    propose(env.client, a, env.status()["trunk"], {"app.py": APP.replace("amount * 2", "amount * 7")})
    assert _wait(lambda: len(_procs(marker)) == 2, 20), "the check did not start"
    leader = _procs(marker + "-leader")
    return marker, leader + _procs(marker + "-grandchild")


def test_sigterm_during_a_check_stops_within_seconds(repo_env):
    w = repo_env.w
    marker, pids = _start_long_check(repo_env)
    t0 = time.monotonic()
    w.proc.send_signal(signal.SIGTERM)
    w.proc.wait(30)
    assert time.monotonic() - t0 < STOP_S
    assert w.proc.returncode == 0
    assert _wait(lambda: not _procs(marker), 5), "the check outlived the worker"
    assert not any((w.home / "checks").iterdir())  # nothing left to reap


def test_sigkill_takes_the_check_along_and_the_next_start_reaps_its_group(repo_env):
    w = repo_env.w
    marker, (leader, grandchild) = _start_long_check(repo_env)
    assert (w.home / "checks" / str(leader)).exists()  # the running group is recorded
    w.proc.kill()
    w.proc.wait()
    assert _wait(lambda: leader not in _procs(marker), 5), "the check's first process outlived a SIGKILL of the worker"
    assert grandchild in _procs(marker)  # left behind in the group, for the next start
    w.start()
    assert _wait(lambda: grandchild not in _procs(marker), 5), "the next start did not kill the leftover"
    assert "killed 1 processes of checks a previous worker left running" in w.output.read_text()
    w.stop()
    assert _wait(lambda: not _procs(marker), 5)


def _free_port() -> int:
    import socket as sock
    with sock.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_up(tmp_path):
    """`lonca up` on a free port, returned once its worker answers and its console accepts."""
    import socket as sock
    import subprocess
    import sys

    from conftest import Worker
    from lonca.client import wait_until_answering
    w = Worker(tmp_path, None)
    port = _free_port()
    up = subprocess.Popen([sys.executable, "-m", "lonca", "up", "--port", str(port)], env=w.env, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert wait_until_answering(up, w.socket, 30) is None
        deadline = time.monotonic() + 30
        while True:  # the console serves
            try:
                sock.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and up.poll() is None
                time.sleep(0.1)
        children = Path(f"/proc/{up.pid}/task/{up.pid}/children").read_text().split()
        assert len(children) == 1
        return w, up, int(children[0])
    except BaseException:
        up.kill()
        up.wait()
        raise


@contextlib.contextmanager
def _lonca_up(tmp_path):
    """_start_up's (worker, `lonca up`, worker pid); whatever the test did, neither outlives it."""
    w, up, worker = _start_up(tmp_path)
    try:
        yield w, up, worker
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_lonca_up_ends_when_its_worker_dies(tmp_path):
    """A worker that dies under `lonca up` stops the console too, and `lonca up` exits non-zero
    saying so and where the worker's messages are."""
    with _lonca_up(tmp_path) as (_, up, worker):
        os.kill(worker, signal.SIGKILL)
        out, _ = up.communicate(timeout=2 * STOP_S)
        assert up.returncode not in (0, None), out
        assert "the worker died (exit code -9; its messages are above, in this output)" in out, out


def test_sigterm_of_lonca_up_stops_its_worker(tmp_path):
    """SIGTERM (a service manager's stop) ends `lonca up` within the graceful bound and takes its
    worker along: no worker process is left and the worker's socket no longer answers."""
    from lonca.client import Client, Unreachable
    with _lonca_up(tmp_path) as (w, up, worker):
        up.send_signal(signal.SIGTERM)
        out, _ = up.communicate(timeout=2 * STOP_S)
        assert up.returncode == 0, out
        assert _wait(lambda: not _alive(worker), 1), f"the worker {worker} outlived `lonca up`: {out}"
        with pytest.raises((Unreachable, OSError)):
            with Client(w.socket, timeout=1) as c:
                c.call("ping")


def test_sigterm_to_the_whole_group_is_a_clean_stop(tmp_path):
    """A service manager (or `timeout`) signals `lonca up` and its worker at once: the worker may
    end before `lonca up` took its own signal, and that is a stop, not a death (it said "the
    worker died (exit code 0)" and exited 1, after a traceback)."""
    with _lonca_up(tmp_path) as (_, up, worker):
        os.killpg(up.pid, signal.SIGTERM)
        out, _ = up.communicate(timeout=2 * STOP_S)
        assert up.returncode == 0, out
        assert "worker died" not in out and "Traceback" not in out, out
        assert _wait(lambda: not _alive(worker), 1), f"the worker {worker} outlived `lonca up`: {out}"


def test_lonca_up_on_a_busy_port_says_so_before_anything_starts(tmp_path):
    """A port already listened on is refused with a usage error naming it, before the console's
    address is announced and before a worker starts."""
    import socket as sock
    import subprocess
    import sys

    from conftest import Worker
    from lonca.output import USAGE
    w = Worker(tmp_path, None)
    with sock.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "lonca", "up", "--port", str(port)], env=w.env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == USAGE, res
    assert f"port {port} on localhost is already in use" in res.stderr and "--port" in res.stderr, res.stderr
    assert "the console is at" not in res.stdout, res.stdout
    assert not w.socket.exists(), "a worker started although the console could not listen"
