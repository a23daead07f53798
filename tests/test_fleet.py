"""Many agents of one user against a small connection cap (issue 18, "1,000 agents at the default
caps", here 30 agents at a per-uid cap of 4): with a connection each, the daemon evicts the
quietest (`closed`) and the agent sends its heartbeat again on a new one; sharing one
`ClientPool` of two connections, nothing is evicted. Either way no call fails, and the log holds
each agent's beats exactly once: a request sent again after `closed` never ran twice. And one
new connection evicts one connection, also where both caps are full."""
import asyncio
import json
import random
import socket
import time
from collections import Counter

import pytest

from helpers import RepoEnv
from lonca.async_client import AsyncClient, ClientPool

CAP = 4
AGENTS = 30
BEATS = 5


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def capped_env(make_worker, source_repo, monkeypatch):
    w = make_worker({"LONCA_MAX_CONNS_PER_UID": str(CAP)})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    env = RepoEnv(w, source_repo)
    yield env
    env.client.close()


def agents(env: RepoEnv) -> list[dict]:
    return [env.agent(f"fleet-{i}") for i in range(AGENTS)]


def evicted(env: RepoEnv) -> int:
    return env.client.call("ping")["refused"]["evicted"]


def beats_logged(env: RepoEnv) -> Counter:
    """Heartbeats in the log, by session."""
    return Counter(e["entry"]["op"]["session"] for e in env.log()
                   if e["entry"]["op"]["op"] == "observe" and {"kind": "heartbeat"} in e["entry"]["op"]["events"])


async def beat(client, session: dict, rnd: random.Random, failures: list) -> None:
    """whoami (the answer names this agent's session, whatever connection carried it), then BEATS
    heartbeats with short random pauses."""
    try:
        me = await client.call("whoami", token=session["token"])
        assert me["actor"].endswith("/" + session["session"]), me["actor"]
        for _ in range(BEATS):
            await client.call("session.heartbeat", token=session["token"])
            await asyncio.sleep(rnd.random() * 0.02)
    except BaseException as e:  # noqa: BLE001 - every failure is the test's finding
        failures.append(e)


def test_an_agent_a_connection_past_the_cap_fails_no_call(capped_env):
    env = capped_env
    sessions, before = agents(env), evicted(env)

    async def main() -> list:
        clients = [AsyncClient(env.w.socket, timeout=30) for _ in sessions]
        failures: list = []
        await asyncio.gather(*(beat(c, s, random.Random(i), failures) for i, (c, s) in enumerate(zip(clients, sessions))))
        for c in clients:
            c.close()
        return failures
    assert asyncio.run(main()) == []
    assert evicted(env) - before >= AGENTS - CAP   # the calls met evicted connections, and none failed
    assert beats_logged(env) == Counter({s["session"]: BEATS for s in sessions})


def test_agents_sharing_a_pool_stay_under_the_cap(capped_env):
    env = capped_env
    sessions, before = agents(env), evicted(env)

    async def main() -> list:
        pool = ClientPool(env.w.socket, size=CAP - 2)   # with the test's own connection, under the cap
        failures: list = []
        await asyncio.gather(*(beat(pool, s, random.Random(i), failures) for i, s in enumerate(sessions)))
        pool.close()
        return failures
    assert asyncio.run(main()) == []
    assert evicted(env) == before
    assert beats_logged(env) == Counter({s["session"]: BEATS for s in sessions})


def test_a_new_connection_evicts_one_when_both_caps_are_full(make_worker):
    """Caps equal (as a descriptor limit makes them): one eviction a new connection, not one per cap."""
    w = make_worker({"LONCA_MAX_CONNS": "3", "LONCA_MAX_CONNS_PER_UID": "3"})
    time.sleep(0.3)  # let the worker see the start-up probe's connection close

    def ping(s: socket.socket, rid: int) -> dict:
        s.sendall(json.dumps({"id": rid, "method": "ping", "params": {}}).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())
    conns = []
    try:
        for i in range(4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(w.socket))
            conns.append(s)
            assert ping(s, i + 1)["ok"]
            time.sleep(0.05)
        assert ping(conns[3], 9)["result"]["refused"]["evicted"] == 1
        assert ping(conns[1], 9)["ok"] and ping(conns[2], 9)["ok"]
    finally:
        for s in conns:
            s.close()
