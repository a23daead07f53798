"""The clients' one backoff (lonca/client.py): steps double from 10 ms and end with the budget,
whether a blocking client sleeps them (`wait`) or an event loop does (`next_delay`). Each wait is
drawn between half and all of its step (jitter), so clients refused together spread out."""
import time

from lonca.client import Backoff


def test_steps_double_and_each_wait_lies_in_its_step():
    b = Backoff(budget_s=60)
    t0 = time.monotonic()
    assert b.wait()  # slept the first wait: between 5 and 10 ms
    assert time.monotonic() - t0 >= 0.005
    for step in (0.02, 0.04, 0.08):
        delay = b.next_delay()
        assert delay is not None and step / 2 <= delay <= step


def test_waits_are_spread():
    firsts = {Backoff(budget_s=60).next_delay() for _ in range(50)}
    assert len(firsts) > 1


def test_the_budget_ends_both_ways():
    b = Backoff(budget_s=0.05)
    while b.wait():
        pass
    assert b.next_delay() is None and not b.wait()
    short = Backoff(budget_s=0.015)
    first = short.next_delay()
    assert first is not None and 0.005 <= first <= 0.01
    second = short.next_delay()
    assert second is None or second <= 0.015  # never more than what is left of the budget
