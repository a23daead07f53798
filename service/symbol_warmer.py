"""Warming the bases that proposals are made against, off the request path.

The first change to a base that renames or re-signs a common name (`__init__`, `run`) would
otherwise read every file that mentions it while the agent waits. Once a base has been asked
about, `warm_base` answers its own names for all its files, one base at a time on a thread of
its own, and keeps the index that lets `affected` visit only the files holding a name.

The symbol cache is most of the worker's heap, and a full collection walks all of it (a tenth of
a second for a 2 000-file base). After a warm, garbage is collected once and what is left is
frozen (gc.freeze): later full collections walk only what came after. Tables hold no cycles,
so a frozen one that leaves the cache is still freed by its reference count.
"""
from __future__ import annotations

import gc
import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pygit2

from lonca.symbols import SymbolCache, TreeEntry, warm_base

log = logging.getLogger("lonca.symbols")
_REMEMBERED = 256


class SymbolWarmer:
    def __init__(self, cache: SymbolCache, store: Callable[[str], pygit2.Repository]) -> None:
        self.cache, self.store = cache, store
        self._asked: OrderedDict[str, None] = OrderedDict()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lonca-warm")

    def ask(self, repo: str, base: str, base_map: dict[str, TreeEntry]) -> None:
        """Warm commit `base` of `repo` (its tree is `base_map`) unless it was asked before."""
        if base in self._asked:
            return
        self._asked[base] = None
        if len(self._asked) > _REMEMBERED:
            self._asked.popitem(last=False)
        self._pool.submit(self._warm, repo, base, base_map)

    def _warm(self, repo: str, base: str, base_map: dict[str, TreeEntry]) -> None:
        try:
            store = self.store(repo)
            read = warm_base(base_map, self.cache, lambda oid: store[oid].data, base)
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            log.info("warmed base %s of %s: %d files read", base[:12], repo, read)
        except Exception:   # a warm only saves time later; the facts stay right without it
            log.exception("warming base %s of %s failed", base[:12], repo)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
