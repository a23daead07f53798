"""The worker hands the C heap's free pages back (service/heap.release): in the soak bench, pages
freed amid pages in use were what its RSS kept climbing by after its caches were full."""
import sys

import pytest

from lonca.service import heap


def rss_anon_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssAnon and glibc's malloc_trim are Linux's")
def test_release_gives_back_pages_freed_amid_pages_in_use():
    assert heap._MALLOC_TRIM is not None, "glibc's malloc_trim is what the worker's heap is released with"
    kept, freed = [], []
    for i in range(160_000):    # 1 KB objects come from malloc (pymalloc takes up to 512 bytes)
        (kept if i % 16 == 0 else freed).append(bytes(1024))
    del freed                   # ~150 MB free, each page beside one still in use: malloc keeps them
    before = rss_anon_mb()
    heap.release()
    after = rss_anon_mb()
    assert before - after > 100, f"RssAnon {before:.0f} -> {after:.0f} MB"
    assert len(kept) == 10_000
