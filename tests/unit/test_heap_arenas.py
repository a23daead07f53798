"""The worker's threads share two malloc arenas (service/heap.tune): glibc would give each new
thread that allocates one of its own, each keeping its own free pages."""
import subprocess
import sys

import pytest

# Threads that allocate at once, then glibc's malloc_info counts the arenas (<heap nr=...>).
PROBE = r"""
import ctypes, sys, threading
from lonca.service import heap
if sys.argv[1] == "tuned":
    heap.tune()
libc = ctypes.CDLL(None)
start = threading.Barrier(7)
def work():
    start.wait()
    keep = [bytes(2048) for _ in range(2000)]   # over pymalloc's 512 bytes: from malloc
    start.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads: t.start()
start.wait(); start.wait()
for t in threads: t.join()
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
libc.open_memstream.restype = ctypes.c_void_p
f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(f))
libc.fclose(ctypes.c_void_p(f))
print(buf.value.decode().count("<heap nr="))
"""


def arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or sys.implementation.name != "cpython",
                    reason="glibc's mallopt and malloc_info")
def test_threads_share_two_arenas_after_tune():
    assert arenas("tuned") <= 2
    assert arenas("default") > 2    # the probe does reach glibc's per-thread arenas without tune
