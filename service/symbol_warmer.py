"""Warming the bases that proposals are made against, off the request path.

The first change to a base that renames or re-signs a common name (`__init__`, `run`) would
otherwise read every file that mentions it while the agent waits. `warm_base` answers, for all
the files of a base, the names its own symbols define, and keeps the index that lets `affected`
visit only the files holding a name.

One thread warms, one base at a time. Each repository has at most one warm waiting, the newest
commit asked for: a trunk that moved thirty times while a warm ran is warmed once, at its last
commit. A warm starts from the repository's last warmed index and the files that changed since
(change_build.tree_changes, which descends only into subtrees that differ), so a trunk move costs
what it changed, not the size of the repository. A stop is seen between files.

No full collection here: one walks the whole symbol cache (0.45 s at 20 000 files) holding the
GIL, so every request waits for it. But a warm of a whole tree (the first, a restart's) makes
tables faster than the collector's own thresholds expect, and it would run full collections of
a growing heap on its own (eight of them, 2 s in all, in a 20 000-file restart). So every 2 048
files, and at the end, such a warm collects the young generations (cheap: only what is new) and
freezes what is left (gc.freeze, which moves lists, walks nothing): later collections never walk
the tables again. Tables hold no cycles, so a frozen one that leaves the cache is still freed by
its reference count. Warms of a trunk move make a few tables and freeze nothing.
"""
from __future__ import annotations

import gc
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pygit2

from lonca.symbols import SymbolCache, language_of, warm_base
from lonca.symbols.trees import has_text

from . import heap
from .change_build import TreeMaps, tree_changes, tree_map
from .symbol_store import SqliteTables

log = logging.getLogger("lonca.symbols")
ELSEWHERE = 5000    # files from which a warm from scratch is made in a process of its own
SAMPLE = 256        # files looked up to judge whether the tables on disk hold a tree


def warm_into(store_path: str, commit: str, tables_path: str) -> None:
    """In a process of its own: warm `commit` of the store into the tables on disk. The process
    is short-lived, so its collector is off."""
    gc.disable()
    repo = pygit2.Repository(store_path)
    tables = SqliteTables(Path(tables_path))
    warm_base(tree_map(repo, repo.get(commit).tree), SymbolCache(store=tables), lambda oid: repo[oid].data)
    tables.close(timeout_s=3600)


class SymbolWarmer:
    def __init__(self, cache: SymbolCache, store: Callable[[str], pygit2.Repository],
                 tree_maps: TreeMaps) -> None:
        self.cache, self.store, self.tree_maps = cache, store, tree_maps
        self._wanted: dict[str, str] = {}       # repo -> the newest commit asked for
        self._last: dict[str, tuple[str, object]] = {}   # repo -> (commit, its NameIndex)
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lonca-warm", daemon=True)
        self._thread.start()

    def ask(self, repo: str, commit: str) -> None:
        """Warm `commit` of `repo` next, in place of any warm of it still waiting."""
        with self._cond:
            last = self._last.get(repo)
            if last is not None and last[0] == commit:
                self._wanted.pop(repo, None)
                return
            self._wanted[repo] = commit
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                repo = next(iter(self._wanted))
                commit = self._wanted.pop(repo)
            try:
                self._warm(repo, commit)
            except Exception:   # a warm only saves time later; the facts stay right without it
                log.exception("warming base %s of %s failed", commit[:12], repo)

    def _warm(self, repo: str, commit: str) -> None:
        store = self.store(repo)
        t0, cpu0 = time.perf_counter(), time.thread_time()
        last = self._last.get(repo)
        if last is not None and last[0] == commit:     # asked again while it was being warmed
            return
        if last is not None:
            changes = tree_changes(store, store.get(last[0]).tree, store.get(commit).tree)
            index = warm_base(changes, self.cache, lambda oid: store[oid].data, commit, since=last[1],
                              stop=self._stopping.is_set)
            what = f"{len(changes)} paths changed since {last[0][:12]}"
        else:
            files = self.tree_maps.get(store, commit)
            if len(files) >= ELSEWHERE and self.cache.store is not None and not self._on_disk(files) \
                    and not self._elsewhere(store.path, commit, str(self.cache.store.path)):
                return
            index = warm_base(files, self.cache, lambda oid: store[oid].data,
                              commit, stop=self._stop_and_freeze())
            heap.freeze()
            what = "from scratch"
        if index is None:
            return
        self.cache.fit(len(index.files))    # trunk's size bounds what the cache holds
        with self._cond:
            self._last[repo] = (commit, index)
        log.info("warmed base %s of %s: %s, %.0f ms (%.0f ms of CPU)", commit[:12], repo, what,
                 (time.perf_counter() - t0) * 1000, (time.thread_time() - cpu0) * 1000)

    def _on_disk(self, files: dict) -> bool:
        """Whether the tables on disk hold (nearly) the whole tree, as after a restart: judged
        from a sample of its files. Then a process of its own would only read them back too,
        which cost as much CPU as this process reading them (7.8 s at 100 000 files)."""
        texts = [(path, e.oid) for path, e in files.items() if has_text(e.mode)]
        sample = texts[::max(1, len(texts) // SAMPLE)]
        if not sample:
            return True
        found = self.cache.store.get_many([(oid, language_of(path)) for path, oid in sample])
        return len(found) >= 0.9 * len(sample)

    def _elsewhere(self, store_path: str, commit: str, tables_path: str) -> bool:
        """The tables and mentions of a whole tree, made by a process of their own into the
        tables on disk, which this process then reads back as a restart does (decoding a table
        costs a tenth of parsing it, and the parsing no longer holds this process's GIL). False
        when the worker stops meanwhile: the process is ended."""
        # a plain interpreter, not multiprocessing: its spawn would run `python -m lonca`'s main again
        proc = subprocess.Popen([sys.executable, "-c", "import sys; from lonca.service.symbol_warmer import "
                                 "warm_into; warm_into(*sys.argv[1:])", store_path, commit, tables_path],
                                stdin=subprocess.DEVNULL)
        while proc.poll() is None:
            if self._stopping.wait(0.1):
                proc.kill()
                proc.wait()
                return False
        if proc.returncode:
            log.warning("the warm of %s in a process of its own exited %s; warming here", commit[:12], proc.returncode)
        return True

    def _stop_and_freeze(self) -> Callable[[], bool]:
        """warm_base's `stop`, asked every 64 files: whether to stop, and every 32nd time a freeze."""
        asked = 0

        def stop() -> bool:
            nonlocal asked
            asked += 1
            if asked % 32 == 0:
                heap.freeze()
            return self._stopping.is_set()
        return stop

    def close(self) -> None:
        """Stop: a running warm gives up at its next file."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=1)
