"""The single writer of the logs, with group commit.

Requests queue a `decide` callable; the writer runs them one after the other against the state
(so every decision sees every entry before it), turns each into a signed, chained entry, applies
it, and commits the whole batch in one transaction before anyone is answered. While a batch
commits, the next one gathers."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

from lonca.canonical import canonical, sha256_hex
from lonca.protocol import LOG_FORMAT, ZERO_HASH, LoncaError

from .state import State
from .store import LogRow

DAEMON = {"kind": "daemon"}


@dataclass
class Draft:
    """What a decision wants logged. `rows` are other rows committed in the same transaction;
    `result` turns the appended entry into the method's answer."""
    actor: dict
    op: dict
    decision: dict
    human: dict | None = None
    facts: dict | None = None
    evidence: list = field(default_factory=list)
    symbols_engine: int | None = None
    rows: list[SQLModel] = field(default_factory=list)
    result: Callable[[dict], dict] | None = None


def allow(*reasons: str) -> dict:
    return {"outcome": "allow", "reasons": list(reasons)}


def deny(*reasons: str) -> dict:
    """A denial, each reason once, in the order first given."""
    return {"outcome": "deny", "reasons": list(dict.fromkeys(reasons))}


class LogWriter:
    def __init__(self, engine: Engine, key: Ed25519PrivateKey, state: State, now_ms: Callable[[], int],
                 on_failure: Callable[[], None]):
        self.engine = engine
        self.key = key
        self.state = state
        self.now_ms = now_ms
        self.on_failure = on_failure
        self._pending: list[tuple[str, Callable[[], Draft], asyncio.Future]] = []
        self._wake = asyncio.Event()
        self._appended = asyncio.Condition()
        # Entries are applied to the state as they are decided and become durable a commit
        # later: readers wait for what was applied when they came (never a dirty read).
        self._applied = 0
        self._durable = 0
        self.durable_next: dict[str, int] = {}  # repo -> the seq after its last durable entry
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lonca-log")
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        self._db.shutdown(wait=True)

    async def on_db(self, fn):
        """Run `fn` on the database thread, after the commits queued before it."""
        return await asyncio.get_running_loop().run_in_executor(self._db, fn)

    async def append(self, repo: str, decide: Callable[[], Draft]) -> dict:
        """Decide and log; returns {"seq", "decision", **the draft's result}. A LoncaError raised
        by `decide` is the answer and nothing is logged."""
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((repo, decide, fut))
        self._wake.set()
        return await fut

    async def wait_for(self, repo: str, seq: int, timeout_s: float) -> None:
        """Until the repository's log has a durable entry at `seq` or the time runs out; holds no lock."""
        async with self._appended:
            try:
                await asyncio.wait_for(self._appended.wait_for(lambda: self.durable_next.get(repo, 1) > seq), timeout_s)
            except asyncio.TimeoutError:
                pass

    @property
    def dirty(self) -> bool:
        return self._durable < self._applied

    async def settled(self) -> None:
        """Until every entry applied so far is durable (at most the batch being committed)."""
        target = self._applied
        if self._durable >= target:
            return
        async with self._appended:
            await self._appended.wait_for(lambda: self._durable >= target)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            entries: list[dict] = []
            rows: list[SQLModel] = []
            answers: list[tuple[asyncio.Future, dict]] = []
            for repo, decide, fut in batch:
                try:
                    draft = decide()
                    row, entry = self._entry(repo, draft)
                except LoncaError as e:
                    fut.set_exception(e)
                    continue
                except Exception as e:  # a bug in a decision must not stop the writer
                    fut.set_exception(LoncaError("internal", f"the daemon failed to decide: {type(e).__name__}"))
                    continue
                entries.append(row)
                rows.extend(draft.rows)
                answer = {"seq": entry["seq"], "decision": entry["decision"]}
                if draft.result:
                    answer.update(draft.result(entry))
                answers.append((fut, answer))
            if not entries:
                continue
            try:
                await loop.run_in_executor(self._db, self._commit, entries, rows)
            except Exception as e:
                for fut, _ in answers:
                    fut.set_exception(LoncaError("internal", f"the log could not be written ({type(e).__name__}); nothing was logged"))
                # the state is the durable log's again: replayed on the database thread, so the
                # event loop goes on answering meanwhile (the new state is swapped in at the end)
                await loop.run_in_executor(self._db, self.on_failure)
                self._durable = self._applied
                continue
            self._durable = self._applied
            for e in entries:
                self.durable_next[e["repo"]] = max(self.durable_next.get(e["repo"], 1), e["seq"] + 1)
            for fut, answer in answers:
                if not fut.done():
                    fut.set_result(answer)
            async with self._appended:
                self._appended.notify_all()

    def _entry(self, repo: str, d: Draft) -> tuple[dict, dict]:
        rs = self.state.repo(repo)
        seq, prev = (rs.next_seq, rs.head_hash) if rs else (1, ZERO_HASH)
        entry = {
            "format": LOG_FORMAT, "seq": seq, "prev": prev, "time_ms": self.now_ms(),
            "actor": d.actor, "op": d.op, "evidence": d.evidence, "facts": d.facts,
            "symbols_engine": d.symbols_engine, "decision": d.decision, "human": d.human,
        }
        text = canonical(entry)
        hash_hex = sha256_hex(text)
        sig = self.key.sign(bytes.fromhex(hash_hex)).hex()
        self.state.apply(repo, entry, hash_hex)
        self._applied += 1
        return {"repo": repo, "seq": seq, "entry": text.decode(), "hash": hash_hex, "sig": sig}, entry

    def _commit(self, entries: list[dict], rows: list[SQLModel]) -> None:
        with Session(self.engine) as s:
            s.execute(insert(LogRow), entries)  # one executemany: ORM objects per entry cost more than the commit
            for row in rows:
                s.merge(row)
            s.commit()


def entry_json(row: LogRow) -> dict:
    return {"entry": json.loads(row.entry), "hash": row.hash, "sig": row.sig}
