"""The queue's runner slots: `[queue] runners` checks at once, shared by the rounds in flight.

With pipelined rounds (docs/decisions.md, "Pipelined rounds…") two rounds verify at once, each
with a thread per runner; the slots keep the checks running at once to the policy's count, and
give a free slot to the older round first (lower `priority`), since the younger one is built on
what the older one lands. Each slot has a number, which a check's checkout may be kept under.
"""
from __future__ import annotations

import heapq
import itertools
import threading
from contextlib import contextmanager
from typing import Iterator


class Slots:
    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._free = list(range(self.size))
        self._waiting: list[tuple[int, int]] = []   # (priority, arrival): a heap
        self._arrival = itertools.count()
        self._cond = threading.Condition()

    @contextmanager
    def take(self, priority: int) -> Iterator[int]:
        """A free slot's number, held for the `with` block; waits behind every waiter of a lower
        priority, and behind earlier ones of the same."""
        me = (priority, next(self._arrival))
        with self._cond:
            heapq.heappush(self._waiting, me)
            while not (self._free and self._waiting[0] == me):
                self._cond.wait()
            heapq.heappop(self._waiting)
            slot = self._free.pop()
            self._cond.notify_all()     # the next waiter may take another free slot
        try:
            yield slot
        finally:
            with self._cond:
                self._free.append(slot)
                self._cond.notify_all()

    @property
    def idle(self) -> bool:
        with self._cond:
            return len(self._free) == self.size and not self._waiting
