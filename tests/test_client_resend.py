"""The project's own clients under a full daemon (issue 18): a real worker with a small per-uid
connection cap evicts the quietest connection for each new one (`closed`, id 0), and a burst of
connections overflows the listen backlog. `lonca.client.Client` and `AsyncClient` open a new
connection and send the request again, and retry a full backlog briefly: no call fails."""
import asyncio
import random
import threading

import pytest

from lonca.async_client import AsyncClient
from lonca.client import Client

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

