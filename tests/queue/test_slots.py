"""The runner slots shared by pipelined rounds: never more checks at once than slots, and a slot
that frees goes to the older round (lower priority number) first."""
import threading
import time
from contextlib import ExitStack

from lonca.queue.slots import Slots


def _wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_freed_slot_goes_to_the_older_round_first():
    slots = Slots(2)
    order: list[str] = []
    with ExitStack() as held:
        assert {held.enter_context(slots.take(0)), held.enter_context(slots.take(0))} == {0, 1}

        def waiter(name: str, priority: int) -> None:
            with slots.take(priority):
                order.append(name)
        younger = threading.Thread(target=waiter, args=("younger", 7))
        younger.start()
        _wait_for(lambda: len(slots._waiting) == 1)
        older = threading.Thread(target=waiter, args=("older", 3))
        older.start()
        _wait_for(lambda: len(slots._waiting) == 2)
        assert not slots.idle
    # both slots free at once: the older waiter is served first all the same
    older.join(10)
    younger.join(10)
    assert order == ["older", "younger"] and slots.idle


def test_never_more_checks_at_once_than_slots():
    slots = Slots(3)
    lock = threading.Lock()
    running, peak, seen = [0], [0], set()

    def check(priority: int) -> None:
        with slots.take(priority) as slot:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
                seen.add(slot)
            time.sleep(0.05)
            with lock:
                running[0] -= 1
    threads = [threading.Thread(target=check, args=(i % 4,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == 3 and seen == {0, 1, 2} and slots.idle
