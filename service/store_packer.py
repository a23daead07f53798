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
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

import pygit2

log = logging.getLogger("lonca.git")
THRESHOLD = 6700        # git's own gc.auto
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
    repo = pygit2.Repository(str(store))
    ids = loose_objects(store)
    if not ids:
        return 0
    builder = pygit2.PackBuilder(repo)
    for oid in ids:
        builder.add(pygit2.Oid(hex=oid))
    builder.write()         # objects/pack/pack-*.pack and .idx, renamed into place when whole
    objects = store / "objects"
    for oid in ids:
        try:
            os.unlink(objects / oid[:2] / oid[2:])
        except FileNotFoundError:
            pass
    return builder.written_objects_count


class StorePacker:
    """One thread that packs the stores it is told about, when they are past THRESHOLD."""

    def __init__(self, store_path: Callable[[str], Path], threshold: int = THRESHOLD) -> None:
        self.store_path, self.threshold = store_path, threshold
        self._wanted: set[str] = set()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="lonca-pack", daemon=True)
        self._thread.start()

    def nudge(self, repo: str) -> None:
        """`repo`'s store grew: look at it (cheap when it needs nothing)."""
        with self._cond:
            self._wanted.add(repo)
            self._cond.notify()

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
            except (pygit2.GitError, OSError) as e:
                log.warning("packing the store of %s failed (%s); tried again when it grows", repo, e)
            except Exception:  # the thread goes on for the other stores and the next nudge
                log.exception("packing the store of %s failed; tried again when it grows", repo)
