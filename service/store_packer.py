"""Packing a git store's loose objects in the background.

Every proposal writes a blob, trees and a commit as loose files, one file an object; a store
that served a few thousand proposals holds tens of thousands of them (103 000 were seen, never
packed), and every lookup that misses the packs searches them on disk. `git gc` is no answer
here: most of a store's objects are reachable from no ref (a proposal's commit lives in the log,
not under refs/), so its prune would delete them, and `git repack` packs only reachable ones.

So the packer packs the loose objects themselves, whatever reaches them: when a store holds more
than THRESHOLD of them (estimated, as git does, from one of the 256 fan-out folders), it lists
them, writes one pack and its index with pygit2's PackBuilder (libgit2, through cffi, which
lets go of the GIL while it compresses), and only then deletes the loose files that the pack
now holds. Writers may go on meanwhile: an object written after the listing stays loose, and a
reader whose handle misses a deleted loose file re-reads the pack folder (libgit2 refreshes its
packs on a miss). Stopping never waits for a pack: the thread is a daemon, an unfinished pack is
a temporary file, and no loose object was deleted before its pack was whole.

Packs are merged too: each pack above is a few thousand proposals' objects, and a store that
served 100,000 proposals would hold dozens of them, each searched on a miss and each with its
index mapped. Past MAX_PACKS, `git repack --geometric=2` rolls the packs up so that each holds
at least twice the objects of all smaller ones together (their count stays logarithmic in the
store's size); it packs every object of the packs it rolls up, reachable or not (pack-objects
--stdin-packs), which is what a store whose proposals live in the log, not under refs, needs,
and reuses their deltas. Without `-d`: git's prune-packed would also remove empty fan-out
folders, racing a libgit2 writer between its mkdir and its rename. The packer deletes the packs
whose objects the new pack all holds itself, index first (a reader that lists the folder then
never sees a pack without its index; one whose handle has the pack listed but not open looks in
the next pack, as libgit2 does while git gc runs). A libgit2 handle that read a deleted pack
keeps it open and mapped: so `generation(repo)` moves on, `merged(repo)` drops every thread's old
handle at once (gitstore.ThreadHandles.let_go: a thread that does no work would keep its own),
and a thread opens its handle again when it next takes it.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

import pygit2

from lonca.protocol import LoncaError

from .remotes import run_git

log = logging.getLogger("lonca.git")
THRESHOLD = 6700        # git's own gc.auto
MAX_PACKS = 8           # past this many packs the store's packs are rolled up (merge_packs)
_HEX = frozenset("0123456789abcdef")


def loose_estimate(store: Path) -> int:
    """About how many loose objects the store holds: 256 times those in objects/17/."""
    try:
        return 256 * sum(1 for name in os.listdir(store / "objects" / "17") if _is_object(name))
    except FileNotFoundError:
        return 0


def loose_objects(store: Path) -> list[str]:
    """The ids of every loose object of the store."""
    out = []
    objects = store / "objects"
    for fan in os.listdir(objects):
        if len(fan) == 2 and set(fan) <= _HEX:
            out += [fan + name for name in os.listdir(objects / fan) if _is_object(name)]
    return out


def _is_object(name: str) -> bool:
    return len(name) == 38 and set(name) <= _HEX


def pack_loose(store: Path) -> int:
    """Pack every loose object of `store` into one new pack, then delete the loose files the
    pack holds. The number of objects packed."""
    ids = loose_objects(store)
    if not ids:
        return 0
    repo = pygit2.Repository(str(store))
    try:
        builder = pygit2.PackBuilder(repo)
        for oid in ids:
            builder.add(pygit2.Oid(hex=oid))
        builder.write()         # objects/pack/pack-*.pack and .idx, renamed into place when whole
    finally:
        # its packs let go now: a Repository is a reference cycle, freed only by a full collection
        repo.free()
    objects = store / "objects"
    for oid in ids:
        try:
            os.unlink(objects / oid[:2] / oid[2:])
        except FileNotFoundError:
            pass
    return builder.written_objects_count


def pack_count(store: Path) -> int:
    return len(_packs(store))


def _packs(store: Path) -> list[Path]:
    """The store's packs, by their index file."""
    try:
        return sorted(p for p in (store / "objects" / "pack").iterdir() if p.suffix == ".idx")
    except FileNotFoundError:
        return []


def pack_ids(idx: Path) -> set[bytes] | None:
    """The object ids (raw 20 bytes) a version 2 pack index lists; None for another version."""
    data = idx.read_bytes()
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        return None
    count = int.from_bytes(data[8 + 255 * 4:8 + 256 * 4], "big")
    start = 8 + 256 * 4
    return {data[start + 20 * i:start + 20 * (i + 1)] for i in range(count)}


def merge_packs(store: Path) -> int:
    """Roll the store's packs up geometrically (git, bounded as every git run of the worker),
    every object they hold kept, and delete the packs the new one holds whole; `git` when git
    fails. How many packs were deleted."""
    before = set(_packs(store))
    run_git(store, "repack", "-q", "--geometric=2", "--no-write-bitmap-index")
    made = [p for p in _packs(store) if p not in before]
    held: set[bytes] = set()
    for idx in made:
        held |= pack_ids(idx) or set()
    deleted = 0
    for idx in sorted(before):
        ids = pack_ids(idx)
        if ids is None or not ids <= held:
            continue
        for suffix in (".idx", ".pack", ".rev", ".bitmap", ".keep"):
            idx.with_suffix(suffix).unlink(missing_ok=True)
        deleted += 1
    return deleted


class StorePacker:
    """One thread that packs the stores it is told about, when they are past THRESHOLD, and
    merges their packs past MAX_PACKS."""

    def __init__(self, store_path: Callable[[str], Path], threshold: int = THRESHOLD, max_packs: int = MAX_PACKS,
                 merged: Callable[[str], None] = lambda repo: None) -> None:
        # merged(repo): called on this thread once the generation moved (ThreadHandles.let_go)
        self.store_path, self.threshold, self.max_packs, self.merged = store_path, threshold, max_packs, merged
        self._generation: dict[str, int] = {}
        self._wanted: set[str] = set()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="lonca-pack", daemon=True)
        self._thread.start()

    def nudge(self, repo: str) -> None:
        """`repo`'s store grew: look at it (cheap when it needs nothing)."""
        with self._cond:
            self._wanted.add(repo)
            self._cond.notify()

    def generation(self, repo: str) -> int:
        """How many times packs of `repo`'s store were rolled up and deleted: a handle opened at
        another generation may hold deleted packs open."""
        return self._generation.get(repo, 0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted:
                    self._cond.wait()
                repo = self._wanted.pop()
            path = self.store_path(repo)
            try:
                if loose_estimate(path) < self.threshold:
                    continue
                t0 = time.monotonic()
                n = pack_loose(path)
                log.info("packed %d loose objects of %s in %.1f s", n, repo, time.monotonic() - t0)
                if pack_count(path) > self.max_packs:
                    t0 = time.monotonic()
                    deleted = merge_packs(path)
                    self._generation[repo] = self.generation(repo) + 1
                    self.merged(repo)
                    log.info("merged %d packs of %s, %d left, in %.1f s", deleted, repo, pack_count(path),
                             time.monotonic() - t0)
            except (pygit2.GitError, OSError, LoncaError) as e:
                log.warning("packing the store of %s failed (%s); tried again when it grows", repo, e)
            except Exception:  # the thread goes on for the other stores and the next nudge
                log.exception("packing the store of %s failed; tried again when it grows", repo)
