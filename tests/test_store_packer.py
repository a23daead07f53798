"""The worker packs a store's loose objects (service/store_packer.py) while other threads go on
writing and reading it: every object stays readable, through handles opened before the pack
too, and what was packed is no longer loose. Past MAX_PACKS its packs are merged, every object
kept, and the threads' handles let go of the packs that were deleted."""
from __future__ import annotations

import gc
import os
import threading
import time

import pygit2

from lonca.service.gitstore import ThreadHandles
from lonca.service.store_packer import StorePacker, loose_estimate, loose_objects, pack_count, pack_loose


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


def deleted_packs_held() -> int:
    """Pack and index files of this process that were deleted but are still open or mapped."""
    deleted = (".pack (deleted)", ".idx (deleted)")
    fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]
    with open("/proc/self/maps") as f:
        maps = [line for line in f if line.rstrip().endswith(deleted)]
    return sum(1 for t in fds if t.endswith(deleted)) + len(maps)


def test_packs_are_merged_past_max_packs_and_handles_let_go_of_the_deleted(tmp_path) -> None:
    store = tmp_path / "s.git"
    pygit2.init_repository(str(store), bare=True)
    packer = StorePacker(lambda name: store, threshold=0, max_packs=3)
    handles = ThreadHandles(lambda name: store, packer.generation)
    blobs: list[str] = []
    for k in range(12):     # 12 packs' worth: without merging, 12 packs
        writer = handles.get("demo")    # as each worker thread takes its handle for a piece of work
        blobs += [str(writer.create_blob(b"round %d blob %d\n" % (k, i))) for i in range(300)]
        packer.nudge("demo")
        deadline = time.monotonic() + 60
        while loose_objects(store) or pack_count(store) > 3:
            assert time.monotonic() < deadline, "the store was not packed and merged"
            time.sleep(0.05)
        reader = handles.get("demo")
        assert reader[blobs[0]].data == b"round 0 blob 0\n" and reader[blobs[-1]].data.startswith(b"round %d" % k)
    assert packer.generation("demo") >= 2 and pack_count(store) <= 3
    fresh = handles.get("demo")
    assert all(fresh[b].data.startswith(b"round ") for b in blobs)     # unreachable from any ref, all kept
    del reader, writer      # the old handles' work ended: the thread's next take closes them
    assert handles.get("demo") is fresh
    assert fresh[blobs[0]].data == b"round 0 blob 0\n"     # the handle in use now holds the new packs only
    assert deleted_packs_held() == 0


def test_threads_that_do_no_work_let_go_of_deleted_packs(tmp_path) -> None:
    """Pool threads that read the store and then sit idle, and one whose work is in flight while
    packs are merged: once that work ends, no deleted pack or index stays open or mapped, though
    the idle threads never took their handles again, and with no collection (a pygit2 Repository
    is a reference cycle: the worker's full collections are rare)."""
    gc.disable()
    try:
        _idle_threads_let_go(tmp_path)
    finally:
        gc.enable()


def _idle_threads_let_go(tmp_path) -> None:
    store = tmp_path / "s.git"
    pygit2.init_repository(str(store), bare=True)
    handles = ThreadHandles(lambda name: store, lambda name: packer.generation(name))
    packer = StorePacker(lambda name: store, threshold=0, max_packs=3, merged=handles.let_go)
    blobs: list[str] = []
    jobs = [threading.Semaphore(0) for _ in range(3)]
    done = threading.Semaphore(0)
    stop = False

    def pool_thread(job: threading.Semaphore) -> None:
        while True:
            job.acquire()           # idle here between pieces of work, as a pool thread is
            if stop:
                return
            reader = handles.get("demo")
            assert all(reader[b].data.startswith(b"round ") for b in blobs)    # maps every pack's index
            del reader
            done.release()

    finish, in_flight = threading.Event(), threading.Event()
    read_late: list[bool] = []

    def long_work() -> None:
        reader = handles.get("demo")
        assert all(reader[b].data.startswith(b"round ") for b in blobs)
        in_flight.set()
        finish.wait()               # its packs are merged and deleted meanwhile
        read_late.append(all(reader[b].data.startswith(b"round ") for b in blobs))

    pool = [threading.Thread(target=pool_thread, args=(job,)) for job in jobs]
    for t in pool:
        t.start()
    worker = None
    try:
        for k in range(12):
            writer = pygit2.Repository(str(store))
            blobs += [str(writer.create_blob(b"round %d blob %d\n" % (k, i))) for i in range(300)]
            writer.free()       # a Repository is a reference cycle, and the collector is off
            packer.nudge("demo")
            deadline = time.monotonic() + 60
            while loose_objects(store) or pack_count(store) > 3:
                assert time.monotonic() < deadline, "the store was not packed and merged"
                time.sleep(0.05)
            if k < 8:               # the pool's last work: the merges of rounds 8-11 come after it
                for job in jobs:
                    job.release()
                for _ in jobs:
                    assert done.acquire(timeout=60)
                idle_since = packer.generation("demo")
            if k == 6:
                worker = threading.Thread(target=long_work)
                worker.start()
                assert in_flight.wait(60)
        assert packer.generation("demo") > idle_since >= 1     # packs the idle threads read were deleted
        finish.set()
        worker.join(60)
        assert read_late == [True]  # the handle in use was not taken from under its work
        deadline = time.monotonic() + 10    # the packer's let_go runs just after its last merge
        while deleted_packs_held():
            assert time.monotonic() < deadline, "deleted packs still mapped: %d" % deleted_packs_held()
            time.sleep(0.05)
    finally:
        stop = True
        finish.set()
        for job in jobs:
            job.release()
        for t in pool:
            t.join(60)
