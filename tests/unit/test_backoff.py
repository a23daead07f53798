"""The clients' one backoff (lonca/client.py): waits double from 10 ms and end with the budget,
whether a blocking client sleeps them (`wait`) or an event loop does (`next_delay`)."""
import time

from lonca.client import Backoff


def test_waits_double_and_one_sequence_serves_both_ways():
    b = Backoff(budget_s=60)
    t0 = time.monotonic()
    assert b.wait()  # slept the first wait
    assert time.monotonic() - t0 >= 0.01
    assert [b.next_delay() for _ in range(3)] == [0.02, 0.04, 0.08]


def test_the_budget_ends_both_ways():
    b = Backoff(budget_s=0.05)
    while b.wait():
        pass
    assert b.next_delay() is None and not b.wait()
    short = Backoff(budget_s=0.015)
    assert short.next_delay() == 0.01
    assert short.next_delay() <= 0.015  # not 0.02: the last wait is what is left of the budget
