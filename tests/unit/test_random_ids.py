"""Ids made on the event loop (service/random_ids.py) are distinct, of the asked length, and cost
one read of the kernel's random source a pool, not one each (the read gives the GIL away)."""
import os

from lonca.service import random_ids


def test_ids_are_distinct_and_read_the_kernel_once_a_pool(monkeypatch):
    reads = []
    real = os.urandom

    def counted(n: int) -> bytes:
        reads.append(n)
        return real(n)
    monkeypatch.setattr(os, "urandom", counted)
    ids = [random_ids.token_hex(8) for _ in range(2000)]
    assert len(set(ids)) == len(ids) and {len(i) for i in ids} == {16}
    assert len(reads) <= 2000 * 8 // random_ids.POOL + 1
    assert len(random_ids.token_bytes(random_ids.POOL + 5)) == random_ids.POOL + 5   # more than a pool
