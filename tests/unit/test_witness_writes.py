"""The witness of a log's head (lonca.audit) under group commit (service/log.py): written after a
commit that no other batch waits behind, else at most every WITNESS_EVERY_S, and caught up when a
waiting batch logs nothing. Whatever the load, once the writer is idle the witness is the log's
last durable entry, signed. A real SQLite file and real signatures; no worker process."""
import asyncio
import threading

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.audit import daemon_sig_ok, read_witnesses
from lonca.protocol import LoncaError
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


def witnessed(tmp_path) -> tuple:
    w = read_witnesses(tmp_path)["demo"]
    return w["seq"], w["hash"], w["sig"]


def test_the_witness_is_the_head_once_a_burst_is_committed(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "WITNESS_EVERY_S", 3600.0)  # only the idle rule writes it here
    key = Ed25519PrivateKey.generate()

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        assert witnessed(tmp_path) == head(writer)
        answers = await asyncio.gather(*(writer.append("demo", lambda n=n: release(n)) for n in range(300)))
        assert sorted(a["seq"] for a in answers) == list(range(2, 302))
        assert witnessed(tmp_path) == head(writer) and head(writer)[0] == 301
        seq, hash_hex, sig = witnessed(tmp_path)
        assert daemon_sig_ok(key.public_key().public_bytes_raw().hex(), hash_hex, sig)
        await writer.stop()
    asyncio.run(run())


def test_a_waiting_batch_that_logs_nothing_brings_the_witness_up(tmp_path, monkeypatch):
    """Entries committed while a batch waited, then that batch refused whole: no commit follows,
    and the witness still catches up with the log."""
    monkeypatch.setattr(log_module, "WITNESS_EVERY_S", 3600.0)
    key = Ed25519PrivateKey.generate()

    def refused() -> Draft:
        raise LoncaError("invalid", "refused before anything is logged")

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        first = [asyncio.ensure_future(writer.append("demo", lambda n=n: release(n))) for n in range(20)]
        await asyncio.sleep(0)  # the writer takes these as one batch and commits them...
        later = asyncio.ensure_future(writer.append("demo", refused))  # ...while this one waits
        await asyncio.gather(*first)
        with pytest.raises(LoncaError):
            await later
        for _ in range(100):  # the catch-up is on the database thread, right after the refusal
            if witnessed(tmp_path) == head(writer):
                break
            await asyncio.sleep(0.01)
        assert witnessed(tmp_path) == head(writer) and head(writer)[0] == 21
        await writer.stop()
    asyncio.run(run())


@pytest.mark.parametrize("every_s, seen_at_next", [(3600.0, 1), (0.0, 2)])
def test_a_commit_with_a_batch_waiting_writes_the_witness_past_the_interval_only(tmp_path, monkeypatch,
                                                                                 every_s, seen_at_next):
    """Under load a batch always waits behind the commit: the witness is left for the next commit
    unless the interval has passed (so a long load still moves it)."""
    monkeypatch.setattr(log_module, "WITNESS_EVERY_S", every_s)
    key = Ed25519PrivateKey.generate()
    seen: list[int] = []

    def watched(n: int) -> Draft:  # decided after the first batch's commit, before its own
        seen.append(witnessed(tmp_path)[0])
        return release(n)

    async def run():
        writer = writer_for(tmp_path, key)
        await writer.append("demo", lambda: init(key))
        gate = threading.Event()
        writer._db.submit(gate.wait)  # the database thread busy: the next commit waits
        first = asyncio.ensure_future(writer.append("demo", lambda: release(0)))
        while not writer._durable < writer._applied:  # decided, its commit queued
            await asyncio.sleep(0.001)
        second = asyncio.ensure_future(writer.append("demo", lambda: watched(1)))
        await asyncio.sleep(0)  # queued behind the commit
        gate.set()
        await asyncio.gather(first, second)
        assert seen == [seen_at_next]
        assert witnessed(tmp_path) == head(writer) and head(writer)[0] == 3  # idle: caught up
        await writer.stop()
    asyncio.run(run())
