"""The project's own clients under a full daemon (issue 18): a real worker with a small per-uid
connection cap evicts the quietest connection for each new one (`closed`, id 0), and a burst of
connections overflows the listen backlog. `lonca.client.Client` and `AsyncClient` open a new
connection and send the request again, and retry a full backlog briefly: no call fails."""
import asyncio
import random
import socket
import threading
import time

import pytest

from lonca.async_client import AsyncClient
from lonca.client import RETRY_S, Client

CAP = 4


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def full_worker(make_worker):
    return make_worker({"LONCA_MAX_CONNS_PER_UID": str(CAP)})


def refused(w) -> dict:
    with Client(w.socket) as c:
        return c.call("ping")["refused"]


def run_threads(n: int, work) -> list[BaseException]:
    failures: list[BaseException] = []
    start = threading.Barrier(n)

    def one(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - every failure is the test's finding
            failures.append(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return failures


def test_clients_held_open_resend_after_eviction(full_worker):
    w = full_worker
    clients = [Client(w.socket, timeout=30) for _ in range(6 * CAP)]

    def work(i: int) -> None:
        rnd = random.Random(i)
        for _ in range(15):
            assert clients[i].call("ping")["protocol"] == 1
            threading.Event().wait(rnd.random() * 0.02)
    failures = run_threads(len(clients), work)
    for c in clients:
        c.close()
    assert failures == []
    assert refused(w)["evicted"] > 0  # calls met evicted connections, and none failed


def test_a_burst_past_the_listen_backlog_all_get_answers(make_worker):
    """300 connections at once, under the default caps: more than the listen backlog holds."""
    w = make_worker()

    def work(i: int) -> None:
        with Client(w.socket, timeout=30) as c:
            c.call("ping")
    assert run_threads(300, work) == []


def test_async_clients_resend_after_eviction(full_worker):
    w = full_worker

    async def main() -> list:
        clients = [AsyncClient(w.socket, timeout=30) for _ in range(6 * CAP)]

        async def work(i: int) -> None:
            rnd = random.Random(i)
            for _ in range(15):
                assert (await clients[i].call("ping"))["protocol"] == 1
                await asyncio.sleep(rnd.random() * 0.02)
        results = await asyncio.gather(*(work(i) for i in range(len(clients))), return_exceptions=True)
        for c in clients:
            c.close()
        return [r for r in results if r is not None]
    assert asyncio.run(main()) == []
    assert refused(w)["evicted"] > 0



@pytest.mark.parametrize("kind", ["blocking", "async"])
def test_busy_is_retried_for_as_long_as_the_clients_timeout(make_worker, kind):
    """The one connection a uid may hold is sending a request slowly, so every new connection is
    refused `busy` for longer than RETRY_S: a client whose timeout is longer waits it out and is
    answered (with RETRY_S as its whole budget, it failed with busy)."""
    w = make_worker({"LONCA_MAX_CONNS_PER_UID": "1"})
    time.sleep(0.3)  # let the worker see the start-up probe's connection close
    held = RETRY_S + 1.5
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.settimeout(10)
    slow.connect(str(w.socket))
    slow.sendall(b'{"id": 1, "method": "ping"')  # a line begun: the connection is not quiet
    timer = threading.Timer(held, lambda: slow.sendall(b', "params": {}}\n'))
    timer.start()
    t0 = time.monotonic()
    try:
        if kind == "blocking":
            with Client(w.socket, timeout=held + 10) as c:
                answer = c.call("ping")
        else:
            async def call() -> dict:
                c = AsyncClient(w.socket, timeout=held + 10)
                try:
                    return await c.call("ping")
                finally:
                    c.close()
            answer = asyncio.run(call())
    finally:
        timer.join()
        slow.close()
    assert time.monotonic() - t0 >= held - 0.2  # it was refused until the slow line ended
    assert answer["refused"]["busy"] > 0
