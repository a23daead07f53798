"""The worker's background tasks under supervision.

A task that ends by an exception is logged with its traceback and stops the worker, which then
exits non-zero so that `lonca up`, systemd or a test sees it, instead of a worker that stays up
answering nothing. Tasks retry themselves, with backoff, what they expect to fail (the database
going away, one repository's queue); what reaches the supervisor is a bug, or a `WorkerStops`
from a task that found the worker cannot go on."""
import asyncio
import logging
from typing import Callable, Coroutine

log = logging.getLogger("lonca.daemon")


class WorkerStops(Exception):
    """Raised by a task that found the worker cannot go on, which is no bug (another worker took
    the database): its message is logged alone, without a traceback, and the worker stops naming
    `what` failed."""

    def __init__(self, what: str, message: str):
        super().__init__(message)
        self.what, self.message = what, message


def supervise(name: str, coro: Coroutine, on_fatal: Callable[[str], None]) -> asyncio.Task:
    async def run():
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except WorkerStops as e:
            log.error("%s; the worker stops", e.message)
            on_fatal(e.what)
        except BaseException:
            log.exception("the worker's %s failed; the worker stops", name)
            on_fatal(name)
        else:
            log.error("the worker's %s ended; the worker stops", name)
            on_fatal(name)
    return asyncio.get_running_loop().create_task(run(), name=f"lonca {name}")
