"""The worker packs a store's loose objects (service/store_packer.py) while other threads go on
writing and reading it: every object stays readable, through handles opened before the pack
too, and what was packed is no longer loose."""
from __future__ import annotations

import threading
import time

import pygit2

from lonca.service.store_packer import StorePacker, loose_estimate, loose_objects, pack_loose


def test_packing_while_writers_write_loses_nothing(tmp_path) -> None:
    store = tmp_path / "s.git"
    repo = pygit2.init_repository(str(store), bare=True)
    first = [str(repo.create_blob(b"blob %d\n" % i)) for i in range(3000)]
    reader = pygit2.Repository(str(store))          # a handle opened before the pack, as the worker's are
    assert reader[first[0]].data == b"blob 0\n"
    assert len(loose_objects(store)) == 3000 and loose_estimate(store) > 0

    written: list[str] = []
    done = threading.Event()

    def write() -> None:
        own = pygit2.Repository(str(store))
        i = 0
        # at least 200 while the pack runs or after it, at most 5,000: on a loaded machine an
        # unbounded writer outran the pack by millions of blobs, then the test read each one back
        while i < 200 or (not done.is_set() and i < 5000):
            written.append(str(own.create_blob(b"later %d\n" % i)))
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        packed = pack_loose(store)
    finally:
        done.set()
        writer.join()
    assert packed >= 3000
    left = set(loose_objects(store))
    assert not left & set(first)                    # what was packed is no longer loose
    assert left <= set(written)                     # only objects written meanwhile may still be
    assert list((store / "objects" / "pack").glob("*.idx"))
    for i, oid in enumerate(first):
        assert reader[oid].data == b"blob %d\n" % i
    again = pygit2.Repository(str(store))
    for oid in written:
        assert again[oid].data.startswith(b"later ")


def test_the_packer_thread_packs_a_store_past_its_threshold(tmp_path) -> None:
    store = tmp_path / "s.git"
    repo = pygit2.init_repository(str(store), bare=True)
    blobs = [repo.create_blob(b"%d" % i) for i in range(500)]
    quiet = StorePacker(lambda name: store, threshold=10**9)
    quiet.nudge("demo")
    time.sleep(0.5)
    assert len(loose_objects(store)) == 500         # under its threshold, a store is left alone
    packer = StorePacker(lambda name: store, threshold=1)
    packer.nudge("demo")
    deadline = time.monotonic() + 30
    while loose_objects(store):
        assert time.monotonic() < deadline, "the store was not packed"
        time.sleep(0.05)
    assert [repo[b].data for b in blobs] == [b"%d" % i for i in range(500)]
