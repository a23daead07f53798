"""service/eager.py: a coroutine run up to its first wait at once, the rest in a task that
behaves as `create_task`'s would: results, failures, cancellation, context, current task."""
import asyncio
import contextvars

import pytest

from lonca.service import eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def run(fn):
    return asyncio.run(fn())


def test_a_coroutine_that_does_not_wait_is_done_at_once():
    seen = []

    async def quick():
        seen.append("ran")

    async def main():
        assert eager.start(asyncio.get_running_loop(), quick()) is None
        assert seen == ["ran"]
    run(main)


def test_the_rest_runs_in_a_task_with_the_first_steps_context():
    async def waits(fut):
        VAR.set("mine")
        got = await fut
        return got, VAR.get(), asyncio.current_task()

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        task = eager.start(loop, waits(fut))
        assert VAR.get() == "unset"  # the first step's set stays in its own context
        fut.set_result(5)
        got, var, current = await task
        assert (got, var, current) == (5, "mine", task)
    run(main)


def test_failures_and_cancellation_reach_the_coroutine():
    events = []

    async def fails(fut):
        try:
            await fut
        except ValueError as e:
            events.append(f"caught {e}")
        await asyncio.sleep(0)
        raise KeyError("after")

    async def cancelled(fut):
        try:
            await fut
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    async def main():
        loop = asyncio.get_running_loop()
        f1, f2 = loop.create_future(), loop.create_future()
        t1, t2 = eager.start(loop, fails(f1)), eager.start(loop, cancelled(f2))
        await asyncio.sleep(0)
        f1.set_exception(ValueError("boom"))
        t2.cancel()
        with pytest.raises(KeyError):
            await t1
        with pytest.raises(asyncio.CancelledError):
            await t2
        assert f2.cancelled() and events == ["caught boom", "cancelled"]
    run(main)


def test_waits_after_the_first_still_yield_the_loop():
    """Only the first yield's turn is the task's first step: each later sleep(0) is a turn."""
    order = []

    async def yields(name, n):
        for i in range(n):
            order.append(f"{name}{i}")
            await asyncio.sleep(0)

    async def main():
        loop = asyncio.get_running_loop()
        a, b = eager.start(loop, yields("a", 3)), eager.start(loop, yields("b", 3))
        await asyncio.gather(a, b)
    run(main)
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]
