"""Foundation figures: ping round trips over 64 connections; logged, signed, durable heartbeats
from 64 agents against the same run's single-row durable SQLite commit rate (group commit)."""

from bench.worker import BenchWorker, drive, pct, sqlite_commit_rate, table

CONNS = 64
DURATION = 4.0


def main() -> None:
    base = sqlite_commit_rate()
    w = BenchWorker()
    try:
        w.init_repo()
        pings = [[{"id": 1, "method": "ping", "params": {}}] for _ in range(CONNS)]
        n, lat = drive(w.socket, pings, DURATION)
        ping_rate = n / DURATION
        tokens = w.start_sessions(CONNS)
        beats = [[{"id": 1, "method": "session.heartbeat", "token": t, "params": {}}] for t in tokens]
        n, hb_lat = drive(w.socket, beats, DURATION)
        hb_rate = n / DURATION
        after = sqlite_commit_rate()
    finally:
        w.stop()
    base = (base + after) / 2
    table([
        ("ping round trips/s (64 connections)", ping_rate, None, ""),
        ("ping p99 ms", pct(lat, 99), None, ""),
        ("heartbeat entries/s (64 agents) vs SQLite commits/s", hb_rate, base, ">= 1.0x"),
        ("heartbeat p50 ms", pct(hb_lat, 50), None, ""),
        ("heartbeat p99 ms", pct(hb_lat, 99), None, "< 25"),
    ])


if __name__ == "__main__":
    main()
