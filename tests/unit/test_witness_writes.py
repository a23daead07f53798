"""The witness of a log's head (lonca.audit) under group commit (service/log.py): written on a
thread of its own after the commits, at most once a WITNESS_EVERY_S, never before the entries it
names are durable, and no answer waits for it. Whatever the load, once the writer is idle the
witness is the log's last durable entry, signed. A real SQLite file and real signatures; no
worker process."""
import asyncio
import threading
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.audit import daemon_sig_ok, read_witnesses
from lonca.service import log as log_module
from lonca.service.daemonkey import DaemonKeys
from lonca.service.log import DAEMON, Draft, LogWriter, allow, deny
from lonca.service.state import State
from lonca.service.store import open_engine, read_log

from entries import HUMAN_KEY, TRUNK, Clock


def writer_for(tmp_path, key: Ed25519PrivateKey) -> LogWriter:
    engine = open_engine(f"sqlite:///{tmp_path / 'lonca.db'}")
    writer = LogWriter(engine, DaemonKeys(tmp_path / "daemon.key", key), State(), Clock(), lambda: None, tmp_path)
    writer.start(lambda task: pytest.fail(f"{task} stopped"))
    return writer


def init(key: Ed25519PrivateKey) -> Draft:
    return Draft(actor=DAEMON, decision=allow(), op={
        "op": "repo.init", "repo": "demo", "trunk": TRUNK, "policy": TRUNK, "human": "ada", "human_key": HUMAN_KEY,
        "daemon_key": key.public_key().public_bytes_raw().hex()})


def release(n: int) -> Draft:  # an entry that changes nothing: a refused release
    return Draft(actor=DAEMON, op={"op": "lease.release", "set": f"s{n}"}, decision=deny("unknown_lease_set"))


def head(writer: LogWriter) -> tuple:
    last = read_log(writer.engine, "demo")[-1]
    return last.seq, last.hash, last.sig


def witnessed(tmp_path) -> tuple | None:
    w = read_witnesses(tmp_path).get("demo")
    return None if w is None else (w["seq"], w["hash"], w["sig"])


def caught_up(tmp_path, writer: LogWriter, within_s: float = 5.0) -> bool:
    """Whether the witness is the log's head, once the witness thread has had `within_s`."""
    deadline = time.monotonic() + within_s
    while witnessed(tmp_path) != head(writer):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_witness_is_the_head_once_a_burst_is_committed(tmp_path):
    key = Ed25519PrivateKey.generate()

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        assert caught_up(tmp_path, writer)
        answers = await asyncio.gather(*(writer.append("demo", lambda n=n: release(n)) for n in range(300)))
        assert sorted(a["seq"] for a in answers) == list(range(2, 302))
        assert caught_up(tmp_path, writer) and head(writer)[0] == 301
        seq, hash_hex, sig = witnessed(tmp_path)
        assert daemon_sig_ok(key.public_key().public_bytes_raw().hex(), hash_hex, sig)
        await writer.stop()
    asyncio.run(run())


def test_no_answer_waits_for_the_witness_and_a_stop_writes_it(tmp_path):
    """The witness thread held up: entries are committed and answered all the same, the witness
    stays behind (never ahead), and catches up once let go; a stop writes the last one."""
    key = Ed25519PrivateKey.generate()

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        assert caught_up(tmp_path, writer)
        gate = threading.Event()
        writer._witnesses.submit(gate.wait)
        answers = await asyncio.wait_for(asyncio.gather(*(writer.append("demo", lambda n=n: release(n))
                                                          for n in range(20))), 30)
        assert max(a["seq"] for a in answers) == 21 == head(writer)[0]
        assert witnessed(tmp_path)[0] == 1
        gate.set()
        assert caught_up(tmp_path, writer)
        gate.clear()
        writer._witnesses.submit(gate.wait)
        await writer.append("demo", lambda: release(99))
        threading.Timer(0.2, gate.set).start()
        await writer.stop()
        assert witnessed(tmp_path) == head(writer) and head(writer)[0] == 22
    asyncio.run(run())


def test_under_load_the_witness_is_written_at_most_once_an_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "WITNESS_EVERY_S", 0.2)
    writes: list[float] = []
    real = log_module.write_witness

    def counted(*args) -> None:
        writes.append(time.monotonic())
        real(*args)
    monkeypatch.setattr(log_module, "write_witness", counted)
    key = Ed25519PrivateKey.generate()

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        started = time.monotonic()
        for n in range(60):     # one commit after another for about a second
            await writer.append("demo", lambda n=n: release(n))
            await asyncio.sleep(0.015)
        elapsed = time.monotonic() - started
        assert caught_up(tmp_path, writer) and head(writer)[0] == 61
        await writer.stop()
        return elapsed

    elapsed = asyncio.run(run())
    assert 2 <= len(writes) <= elapsed / 0.2 + 3
    assert all(b - a >= 0.19 for a, b in zip(writes, writes[1:]))
