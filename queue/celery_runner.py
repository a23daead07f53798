"""Check runners on Celery over RabbitMQ ([queue] runner = "celery"; `lonca runner` starts one).

Why Celery (docs/decisions.md): it is the well-kept task engine of Python, RabbitMQ is already on
these machines, and what a runner needs of it is small: a job goes to one runner, is acknowledged
only once it has run (`acks_late`), and goes back to the queue when its runner dies
(`reject_on_worker_lost`); the answer comes back over the broker (`rpc://`), so a runner needs
nothing but the broker. The job is `remote.pack`'s: the tree and the specs, no path, token or key.

The worker waits for an answer up to the checks' own time limits plus a grace period: no answer
by then is `verification_error` with the reason, never a stuck queue. A broker that can not be
reached, or a connection to it lost while waiting (_NoReconnect), decides nothing: the error goes
up to the queue's loop, which logs it and tries the round again on its next wake, as it does while
the database is away.
"""
from __future__ import annotations

import os
import socket

import pygit2
from celery import Celery
from celery.backends.rpc import ResultConsumer, RPCBackend
from celery.exceptions import TimeoutError as CeleryTimeout
from kombu.exceptions import OperationalError

from .remote import error_results, pack, run_job, unpack_results
from .verification import CheckResult, CheckSpec

BROKER = os.environ.get("LONCA_CELERY_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
TASK = "lonca.verify"
GRACE_S = 60        # on top of the checks' limits: a runner's queueing and unpacking



class _NoReconnect(ResultConsumer):
    """A wait for an answer ends when its connection to the broker is lost. Celery's own consumer
    reconnects and waits on, but the reply queue is not durable: a restarted broker has dropped it
    with any answer in it, and an answer a runner sends before the worker is back is routed
    nowhere. The job is acknowledged by then, so nothing sends it again, and the worker would wait
    out the checks' whole limit for a verdict of `verification_error` (a test restarts a broker
    so). Raised as the broker being away instead: nothing is decided and the queue's loop tries
    the round again, a new job for each candidate."""

    def _reconnect(self):
        raise OperationalError("the connection to the broker was lost while waiting for a runner's answer")


class _Backend(RPCBackend):
    ResultConsumer = _NoReconnect


def _app() -> Celery:
    made = Celery("lonca", broker=BROKER, backend=f"{__name__}:_Backend")
    made.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"],
                     task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
                     broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)
    return made


app = _app()    # the runners'


@app.task(name=TASK)
def verify_job(job: dict) -> dict:
    """On a runner: the job's checks, and which runner ran them."""
    return {"runner": f"celery:{socket.gethostname()}:{os.getpid()}", "runs": run_job(job)}


def verify_remote(repo: pygit2.Repository, tree: str, specs: list[CheckSpec]) -> tuple[list[CheckResult], str]:
    """The checks of `tree` on a runner: (results, the runner's name or why none answered)."""
    if not specs:
        return [], "none"
    try:
        job = pack(repo, tree, specs)
    except ValueError as e:
        return error_results(specs, str(e)), "none"
    limit = sum(s.timeout_s * max(1, s.attempts) for s in specs) + GRACE_S
    # an app of its own for each job: Celery keeps a result consumer per app and thread, and the
    # lanes' threads come and go each round. With one shared app a worker's queue of 20 stalled
    # once on an answer its runner had sent (a reply queue named after a reused thread id, still
    # held by a dead thread's consumer, is the likely cause); with an app per job it has not.
    client = _app()
    try:
        answer = client.send_task(TASK, args=[job]).get(timeout=limit, disable_sync_subtasks=False)
    except CeleryTimeout:
        return error_results(specs, f"no runner answered within {int(limit)} s (are runners up? `lonca runner`)"), "none"
    except (OperationalError, OSError):
        raise       # the broker is away: nothing is decided, the queue waits and tries again
    except Exception as e:     # the job failed on its runner
        return error_results(specs, f"the runner failed: {type(e).__name__}: {e}"[:500]), "none"
    finally:
        client.close()
    return unpack_results(specs, answer["runs"]), answer["runner"]
