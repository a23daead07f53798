"""History figures: what a long history costs the worker.

- `status` and `events` latency after 100,000 log entries and 10,000 ended sessions, beside the
  same repository when it was empty (target within 2x);
- the worker's RSS after that history, and after 100,000 more entries sent through the socket
  (target < 300 MB, and flat);
- restart-to-first-answer (process start to the first `status` answer) with 200,000 entries from
  the worker's checkpoint, beside a start that replays the whole log, as every start did before
  checkpoints (target < 2 s).

The first 100,000 entries are written in this process through the worker's own LogWriter (signed,
chained and applied as the worker does) while the worker is stopped: driving them through the
socket would take minutes. The next 100,000 are real heartbeats through the socket."""
import asyncio
import json
import sqlite3
import time

from bench.procstat import rss_mb
from bench.worker import BenchWorker, median, table

ENDED = 10_000
ENTRIES = 100_000
MORE = 100_000
MESSAGES = 1_000  # to the live session, so `events` has something to read
CONNECTIONS = 16


async def _latencies(socket, req: dict, n: int) -> list[float]:
    reader, writer = await asyncio.open_unix_connection(str(socket), limit=1 << 26)
    out = []
    line = json.dumps(req).encode() + b"\n"
    for _ in range(n):
        t = time.perf_counter()
        writer.write(line)
        answer = json.loads(await reader.readline())
        out.append((time.perf_counter() - t) * 1000)
        if not answer["ok"]:
            raise RuntimeError(answer)
    writer.close()
    return out


def latency(w: BenchWorker, req: dict, n: int = 200) -> float:
    return median(asyncio.run(_latencies(w.socket, req, n)))


def append_in_process(w: BenchWorker, repo: str, steps: list[tuple[dict, dict]]) -> None:
    """Log (actor, op) steps, each allowed, through LogWriter against the worker's database and
    key, as the worker would (the worker is stopped meanwhile)."""
    from lonca.service import daemonkey
    from lonca.service.config import Config
    from lonca.service.daemon import Daemon
    from lonca.service.log import Draft, LogWriter, allow
    from lonca.service.store import daemon_keys_in_log, open_engine

    home = w.tmp / "home"
    d = Daemon(Config(home=home, socket=w.socket, database_url=f"sqlite:///{home / 'lonca.db'}"))
    d.engine = open_engine(d.config.database_url)
    d.keys = daemonkey.DaemonKeys(d.config.key_path, daemonkey.load_or_create(d.config.key_path, daemon_keys_in_log(d.engine)))
    d._replay()

    async def run() -> None:
        writer = LogWriter(d.engine, d.keys, d.state, d.now_ms, lambda: None, d.config.witness_dir)
        writer.start(lambda task: None)
        for start in range(0, len(steps), 2000):
            await asyncio.gather(*(writer.append(repo, lambda a=a, o=o: Draft(actor=a, op=o, decision=allow()))
                                   for a, o in steps[start:start + 2000]))
        await writer.stop()
    asyncio.run(run())
    d.warmer.close()
    d.engine.dispose()


def history(live: str, now: int) -> list[tuple[dict, dict]]:
    """10,000 sessions started and ended, MESSAGES messages to the live session, and the live
    session's heartbeats up to ENTRIES entries."""
    human = {"kind": "human", "name": "bench"}
    steps = []
    for i in range(ENDED):
        sid = f"old{i}"
        actor = {"kind": "agent", "session": sid, "agent": f"a{i}"}
        steps.append((human, {"op": "session.start", "session": sid, "agent": f"a{i}", "model": None, "task": "old",
                              "expires_ms": now + 86_400_000, "scope": {"paths": ["**"]}}))
        if i < MESSAGES:
            steps.append((actor, {"op": "negotiate", "thread": f"t{i}", "to_session": live,
                                  "message": {"type": "counter", "note": f"note {i}"}}))
        steps.append((actor, {"op": "session.end", "session": sid}))
    beat = ({"kind": "agent", "session": live, "agent": "agent0"},
            {"op": "observe", "session": live, "events": [{"kind": "heartbeat"}]})
    steps += [beat] * (ENTRIES - len(steps))
    return steps


async def _beats(socket, tokens: list[str], total: int) -> None:
    async def one(token: str, n: int) -> None:
        reader, writer = await asyncio.open_unix_connection(str(socket), limit=1 << 24)
        line = json.dumps({"id": 1, "method": "session.heartbeat", "token": token, "params": {}}).encode() + b"\n"
        for _ in range(n):
            writer.write(line)
            answer = json.loads(await reader.readline())
            if not answer["ok"]:
                raise RuntimeError(answer)
        writer.close()
    await asyncio.gather(*(one(t, total // len(tokens)) for t in tokens))


def restart(w: BenchWorker, what: str) -> float:
    """Seconds from starting the worker's process (stopped cleanly first) to its first status
    answer; printed at once, as the run is long."""
    w.stop()
    t = time.perf_counter()
    w.start(timeout_s=1800)  # a whole-log replay of 200,000 entries on a busy machine takes minutes
    with w.client() as c:
        c.call("status", repo="bench", token=w.htoken)
    took = time.perf_counter() - t
    print(f"  restart-to-first-answer, {what}: {took:.2f} s", flush=True)
    return took


def events_poll(w: BenchWorker, token: str) -> dict:
    """An agent's `events` poll: from the next seq (what is new since it last asked)."""
    with w.client() as c:
        nxt = c.call("status", repo="bench", token=w.htoken)["next_seq"]
    return {"id": 2, "method": "events", "token": token, "params": {"from": nxt}}


def main() -> None:
    w = BenchWorker()
    try:
        w.init_repo("bench")
        w.policy("[sessions]\nops_per_minute = 100000000\n")  # a benchmark, not an agent: no rate limit
        token = w.start_sessions(1)[0]
        with w.client() as c:
            live = c.call("whoami", token=token)["session"]["id"]
        status_req = {"id": 1, "method": "status", "repo": "bench", "token": w.htoken, "params": {}}
        status_empty, events_empty = latency(w, status_req), latency(w, events_poll(w, token))
        empty_restart = restart(w, "empty repository")

        w.stop()
        t = time.perf_counter()
        append_in_process(w, "bench", history(live, int(time.time() * 1000)))
        build_s = time.perf_counter() - t
        w.start()
        status_full, events_full = latency(w, status_req), latency(w, events_poll(w, token))
        events_all = latency(w, {"id": 3, "method": "events", "token": token, "params": {"from": 1}})
        rss_100k = rss_mb(w.proc.pid)

        t = time.perf_counter()
        asyncio.run(_beats(w.socket, w.start_sessions(CONNECTIONS), MORE))
        beats_per_s = MORE / (time.perf_counter() - t)
        rss_200k = rss_mb(w.proc.pid)
        with w.client() as c:
            entries = c.call("status", repo="bench", token=w.htoken)["next_seq"] - 1

        from_checkpoint = restart(w, "from the checkpoint")
        w.stop()
        con = sqlite3.connect(w.tmp / "home" / "lonca.db")
        con.execute("DELETE FROM checkpoints")  # as before checkpoints: the whole log is replayed
        con.commit()
        con.close()
        whole_log = restart(w, "the whole log (checkpoint deleted)")
    finally:
        w.stop()
    print(f"{ENTRIES} entries ({ENDED} ended sessions) written in-process in {build_s:.1f} s; "
          f"{MORE} heartbeats through the socket at {beats_per_s:.0f}/s; {entries} entries in all")
    table([
        ("status ms after 100k entries, 10k ended vs empty repo", status_full, status_empty, "<= 2.0x"),
        ("events poll ms after 100k entries, 10k ended vs empty repo", events_full, events_empty, "<= 2.0x"),
        (f"events from 1 ms ({MESSAGES} kept for the session) vs poll", events_all, events_full, "-"),
        ("worker RSS MB after 100k entries", rss_100k, None, "< 300"),
        ("worker RSS MB after 100k more (socket) vs after 100k", rss_200k, rss_100k, "< 300, flat"),
        (f"restart-to-first-answer s, {entries // 1000}k entries, checkpoint vs whole log", from_checkpoint, whole_log, "< 2 s"),
        ("restart-to-first-answer s, 200k entries from checkpoint vs empty repo", from_checkpoint, empty_restart, "-"),
    ])


if __name__ == "__main__":
    main()
