"""Run a coroutine up to its first wait in the caller's turn of the loop (Python 3.12's eager task
start, which 3.11 lacks). `loop.create_task` runs a coroutine's first step in the next turn, and
under load each turn waits for the GIL behind the worker's threads (docs/decisions.md, "A Protocol
server: fewer loop turns a request"): a request answered without a wait (ping, a preview judged on
the loop) is answered in the turn that read it.

The first step runs outside any task (`asyncio.current_task()` is None there, so it must not use
`asyncio.timeout`), in a context of its own that the task of the rest then runs in."""
import asyncio
import contextvars
from typing import Any, Coroutine, Generator


class _Started:
    """Awaiting this resumes a coroutine already started, passing what its task sends and throws
    to it as `await` would have: the task sees the future the coroutine is waiting on."""

    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Coroutine, waiting_on: Any):
        self.coro, self.waiting_on = coro, waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self.coro, self.waiting_on
        self.waiting_on = None
        # The task's first step is already a turn after the coroutine's: a bare yield (sleep(0))
        # has had its turn, and a future done by now would only cost one more to be seen done.
        if yielded is None or yielded.done():
            if yielded is not None:
                yielded._asyncio_future_blocking = False
            try:
                yielded = coro.send(None)
            except StopIteration as done:
                return done.value
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # a cancellation, or a future's failure: the coroutine's own
                try:
                    yielded = coro.throw(e)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as done:
                    return done.value


async def _rest(coro: Coroutine, waiting_on: Any) -> Any:
    return await _Started(coro, waiting_on)


def start(loop: asyncio.AbstractEventLoop, coro: Coroutine) -> "asyncio.Task | None":
    """Run `coro` now until it waits; None if it finished (its own exceptions are its to catch:
    one raised in the first step propagates here), else the task running the rest."""
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration:
        return None
    return loop.create_task(_rest(coro, waiting_on), context=context)
