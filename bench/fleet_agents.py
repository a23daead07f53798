"""A fleet of heartbeating agents in one asyncio process (`python -m bench.fleet_agents`), for
`python -m bench fleet`: each agent sends session.heartbeat every BEAT_S with its own token, its
first beat at a random moment of the first interval so the beats spread as independent agents'
would. A process of its own: the bench's loop, busy with the integrating agents, would otherwise
add its waits to the heartbeats'.

argv: socket, a file of tokens (one a line), "own" (an `AsyncClient` each: one connection an
agent) or "shared" (one `ClientPool` for all of them), the pool's size, BEAT_S.
It writes "ready" once every agent has beaten once, and on the line "stop" on stdin prints one
JSON object: {"beats": [[monotonic s, ms]], "failures": [[monotonic s, what]], "lag": [[monotonic
s, ms]], "cpu_share": float}. time.monotonic is the machine's CLOCK_MONOTONIC, so the bench places
the samples in its own phases. "lag" is how late this process's own loop ran a task asked every
LAG_TICK_S, and "cpu_share" the cores it used from "ready" to "stop": a beat's time counts this
process's waits too (reading the answer late), so the bench prints them beside it.
"""
from __future__ import annotations

import asyncio
import json
import random
import resource
import sys
import time
from pathlib import Path

from bench.worker import own_lag
from lonca.async_client import AsyncClient, ClientPool
from lonca.client import Unreachable
from lonca.protocol import LoncaError



def raise_descriptor_limit() -> None:
    """One descriptor a connection: a soft limit of 1 024 (a common default) would fail connects."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def fleet(socket: Path, tokens: list[str], mode: str, pool_size: int, beat_s: float) -> dict:
    beats: list[list[float]] = []
    failures: list[list] = []
    stop = asyncio.Event()
    first = asyncio.Semaphore(0)
    pool = ClientPool(socket, size=pool_size) if mode == "shared" else None

    async def agent(token: str, rnd: random.Random) -> None:
        client = pool or AsyncClient(socket, timeout=60)
        due = time.monotonic() + rnd.random() * beat_s
        started = False
        try:
            while not stop.is_set():
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                t = time.perf_counter()
                try:
                    await client.call("session.heartbeat", token=token)
                    beats.append([time.monotonic(), (time.perf_counter() - t) * 1000])
                except (LoncaError, Unreachable, OSError) as e:
                    failures.append([time.monotonic(), getattr(e, "code", None) or type(e).__name__])
                if not started:
                    started = True
                    first.release()
                due += beat_s
        finally:
            if pool is None:
                client.close()

    lag: list[list[float]] = []
    tasks = [asyncio.create_task(agent(tok, random.Random(i))) for i, tok in enumerate(tokens)]
    for _ in tokens:
        await first.acquire()
    print("ready", flush=True)
    tasks.append(asyncio.create_task(own_lag(lag)))
    wall, cpu = time.monotonic(), time.process_time()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    cpu_share = (time.process_time() - cpu) / (time.monotonic() - wall)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if pool:
        pool.close()
    return {"beats": beats, "failures": failures, "lag": lag, "cpu_share": cpu_share}


def main(argv: list[str]) -> None:
    socket, tokens_file, mode, pool_size, beat_s = argv
    raise_descriptor_limit()
    tokens = Path(tokens_file).read_text().split()
    out = asyncio.run(fleet(Path(socket), tokens, mode, int(pool_size), float(beat_s)))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
