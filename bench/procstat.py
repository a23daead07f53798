"""A process's CPU time and memory from /proc: the one copy the benches read them with."""
from __future__ import annotations

import os
from pathlib import Path


def cpu_s(pid: int, kernel: bool = False) -> float:
    """A process's own CPU time so far (user + system, all threads, not its children's: the
    checks'): a figure the other loads of a shared machine do not stretch, as they stretch every
    wait. `kernel`: the system part alone, which tells the scale bench's two modes apart
    (docs/decisions.md, "Loose objects written with the GIL let go": new files on a disk that
    deleted many in the last minutes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[12]) + (0 if kernel else int(fields[11]))) / os.sysconf("SC_CLK_TCK")


def _status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmRSS:")


def rss_peak_mb(pid: int) -> float:
    return _status_mb(pid, "VmHWM:")
