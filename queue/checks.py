"""Verification checks as bounded subprocesses (DESIGN.md, the Lonis seed's discipline).

argv is executed directly (no shell) in its own session, so its process group holds it and
everything it starts; the environment is PATH plus the names the policy lists; the candidate
tree is the cwd. A hard wall-clock timeout and a byte cap on each of stdout and stderr bound it.
On timeout or overflow the whole group is killed. When the check exits by itself the group is
killed as well, so that nothing it left in the background outlives it, and then it is reaped.
The leader is waited for with WNOWAIT first: until it is reaped its id, which is also the
group's, cannot be reused, so the kill can only reach the check's own processes.

A process that leaves the group (setsid) escapes this; containing it needs a sandbox, which is
the worker's business.

Checks end with the worker. The check's first process gets SIGKILL when the thread that started
it dies (PR_SET_PDEATHSIG, so a SIGKILL of the worker takes it along): util-linux's `setpriv
--pdeathsig KILL` sets it and execs the check, since a `preexec_fn` (Python code between fork and
exec) is unsafe in the worker's threaded process; without setpriv there is no death signal and
the next start's reaping is what is left. `kill_running` kills every
running group at a shutdown; and each running group is recorded in a directory (`record_in`) so
that the next start kills what a killed worker left behind in those groups (`reap_leftovers`).
A record names the group and its leader's start time on this boot: a process is killed only if
it is in that group and started after the leader, so a recycled group id is never hit.
"""
from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TAIL_BYTES = 32 * 1024
_READ = 65536
_DRAIN_S = 2.0
_SETPRIV = shutil.which("setpriv")
# the prefix that execs a check with its death signal set (`--` ends setpriv's own options)
DIE_WITH_WORKER = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []


class _Groups:
    """The process groups of the checks running now; see the module's docstring."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[int] = set()
        self.folder: Path | None = None
        self.closed = False

    def add(self, pgid: int) -> bool:
        """Record a started group; False when the worker is shutting down (kill it)."""
        with self.lock:
            if self.closed:
                return False
            self.running.add(pgid)
            if self.folder is not None:
                try:
                    (self.folder / str(pgid)).write_text(f"{_boot_id()} {_start_time(pgid)}\n")
                except OSError:
                    pass  # the record only helps the next start; the check is still bounded
            return True

    def remove(self, pgid: int) -> None:
        with self.lock:
            self.running.discard(pgid)
            if self.folder is not None:
                (self.folder / str(pgid)).unlink(missing_ok=True)


_GROUPS = _Groups()


def record_in(folder: Path) -> None:
    """Record each running check's group in `folder` (the worker's home), for `reap_leftovers`."""
    folder.mkdir(mode=0o700, exist_ok=True)
    _GROUPS.folder = folder
    _GROUPS.closed = False


def kill_running() -> int:
    """Kill every running check's group and start no new one: the worker is stopping. Returns
    how many were running."""
    with _GROUPS.lock:
        _GROUPS.closed = True
        groups = list(_GROUPS.running)
    for pgid in groups:
        _kill_group(pgid)
    return len(groups)


def reap_leftovers(folder: Path) -> int:
    """Kill what is left of the groups recorded in `folder` by a worker that did not end them
    (killed, or its machine lost power); returns how many processes were killed."""
    killed = 0
    if not folder.is_dir():
        return 0
    boot = _boot_id()
    for record in folder.iterdir():
        try:
            pgid = int(record.name)
            rec_boot, started = record.read_text().split()
            started_at = int(started)
        except (ValueError, OSError):
            record.unlink(missing_ok=True)
            continue
        if rec_boot == boot:
            for pid in _members(pgid, started_at):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
        record.unlink(missing_ok=True)
    return killed


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _stat(pid) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state is [0], pgrp [2], start time [19])."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> int:
    st = _stat(pid)
    return int(st[19]) if st else 0


def _members(pgid: int, not_before: int) -> list[int]:
    """Processes in group `pgid` that started at or after `not_before` (clock ticks since boot)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(entry)
            if st and int(st[2]) == pgid and int(st[19]) >= not_before and st[0] != "Z":
                out.append(int(entry))
    return out


@dataclass(frozen=True)
class CheckRun:
    argv: list[str]
    result: str                 # "pass" | "fail" | "error"
    exit: int | None            # None when it could not start or was killed
    duration_ms: int
    timed_out: bool
    overflowed: bool            # stdout or stderr went past the cap
    output: bytes               # the tail of stdout and stderr as they came, at most 32 KiB
    log_truncated: bool
    error: str | None           # why it did not give a verdict, for people


def child_env(env_names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """PATH and the named variables that are set, nothing else."""
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    for name in env_names:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def run_check(argv: list[str], cwd: Path, env_names: list[str] | tuple[str, ...],
              timeout_s: float, max_bytes: int, on_output: Callable[[bytes], None] | None = None) -> CheckRun:
    """Run one check to its end, its timeout or its byte cap; never raises for the check's
    own behaviour (a missing program is an `error` run). on_output, when given, gets each piece
    of output as it is read (within the byte cap), on this thread: the queue shows a running
    check's tail with it."""
    start = time.monotonic()
    env = child_env(env_names)
    # looked up as exec will (PATH, or relative to the tree): setpriv would only exit 127 saying so
    if shutil.which(str(cwd / argv[0]) if "/" in argv[0] else argv[0], path=env["PATH"]) is None:
        return CheckRun(list(argv), "error", None, _ms(start), False, False, b"", False,
                        f"could not start {argv[0]!r}: no executable file by that name in the tree or on PATH")
    try:
        proc = subprocess.Popen(DIE_WITH_WORKER + list(argv), cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                close_fds=True)
    except OSError as e:
        return CheckRun(list(argv), "error", None, _ms(start), False, False, b"", False,
                        f"could not start {argv[0]!r}: {e.strerror or e}")
    if not _GROUPS.add(proc.pid):
        _kill_group(proc.pid)
    try:
        return _follow(proc, list(argv), start, timeout_s, max_bytes, on_output)
    finally:
        _GROUPS.remove(proc.pid)


def _follow(proc: subprocess.Popen, argv: list[str], start: float, timeout_s: float, max_bytes: int,
            on_output: Callable[[bytes], None] | None) -> CheckRun:
    """Read the check's output until it ends, times out or overflows; kill its group and reap it."""
    tail = bytearray()
    dropped = False
    counts = {proc.stdout.fileno(): 0, proc.stderr.fileno(): 0}
    timed_out = overflowed = exited = False
    deadline = start + timeout_s
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream.fileno(), selectors.EVENT_READ)
    # the leader's exit wakes the loop through a pidfd; without one (not Linux) it is polled
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ)
    try:
        while not exited or any(fd in counts for fd in sel.get_map()):
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = not exited
                break
            # a program may close its pipes before it exits: they say nothing about its end
            wait = min(left, 0.2 if pidfd is not None or len(sel.get_map()) == 2 else 0.01)
            for key, _ in sel.select(timeout=wait):
                fd = key.fd
                if fd == pidfd:
                    sel.unregister(fd)
                    continue
                try:
                    chunk = os.read(fd, _READ)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                room = max_bytes - counts[fd]
                counts[fd] += len(chunk)
                if len(chunk) > room:
                    chunk = chunk[:max(room, 0)]
                    overflowed = True
                tail += chunk
                if on_output is not None and chunk:
                    on_output(chunk)
                if len(tail) > TAIL_BYTES:
                    del tail[:len(tail) - TAIL_BYTES]
                    dropped = True
                if overflowed:
                    break
            if overflowed:
                break
            if not exited and _leader_exited(proc.pid):
                # its group goes with it; what they wrote is still read, up to a short while
                # (a process that left the group could hold the pipes open)
                exited = True
                _kill_group(proc.pid)
                deadline = min(deadline, time.monotonic() + _DRAIN_S)
    finally:
        _kill_group(proc.pid)
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        proc.stdout.close()
        proc.stderr.close()
        code = proc.wait()
    duration = _ms(start)
    truncated = dropped or overflowed
    if timed_out:
        return CheckRun(argv, "error", None, duration, True, False, bytes(tail), truncated,
                        f"timed out after {timeout_s:g} s; its process group was killed")
    if overflowed:
        return CheckRun(argv, "error", None, duration, False, True, bytes(tail), True,
                        f"output over {max_bytes} bytes on one stream; its process group was killed")
    result = "pass" if code == 0 else "fail"
    return CheckRun(argv, result, code, duration, False, False, bytes(tail), truncated, None)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _leader_exited(pid: int) -> bool:
    """Whether the check's first process has exited, without reaping it."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return info is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
