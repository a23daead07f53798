"""The single writer of the logs, with group commit.

Requests queue a `decide` callable; the writer runs them one after the other against the state
(so every decision sees every entry before it), turns each into a signed, chained entry, applies
it, and commits the whole batch in one transaction before anyone is answered. While a batch
commits, the next one gathers.

A commit that fails (the database went away, its file became read-only) leaves the state ahead
of the log: its futures fail with `internal` naming the database, every reader waiting in
`settled` is woken with the same answer, and the writer replays the durable logs (retried with
backoff until the database answers again). Until that replay succeeds the writer is `broken`:
writes and reads that would need the undone batch answer at once, instead of hanging."""
import asyncio
import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, SQLModel

from lonca.audit import write_witness
from lonca.canonical import canonical_text, sha256_hex
from lonca.database_errors import db_cause
from lonca.protocol import LOG_FORMAT, ZERO_HASH, LoncaError

from . import footprint, settled_store, trunk_store
from .daemonkey import DaemonKeys
from .state import State
from .supervision import supervise
from .store import LogRow

DAEMON = {"kind": "daemon"}
# One executemany of the table's Core insert: the ORM's bulk insert (`Session.execute(insert(LogRow))`)
# spent twice the CPU of the insert itself, on the database thread but holding the GIL.
LOG_INSERT = insert(LogRow.__table__)  # type: ignore[arg-type]
log = logging.getLogger("lonca.log")
RECOVER_BACKOFF_S = (0.1, 5.0)  # first and longest wait between replays while the database is away
# The loop's turn: a batch of 50 proposals (decide, canonical JSON, hash, sign, apply: 0.3-1 ms
# each) held every other request for tens of ms; past this it lets them in. The entries applied
# so far are not durable yet, which readers already wait for (`settled`), as during a commit.
# A quick entry (a heartbeat) that came meanwhile is decided at that turn and joins the batch.
TURN_S = 0.002
# The witness of each log's head (lonca.audit) is written on a thread of its own after the commits,
# at most this often: a file made and renamed cost more CPU than the commit's own Python (bench
# leases), and on the database thread its four system calls, each taking the GIL back behind the
# threads running Python, held up every answer of the batch (40 % of that thread's busy samples
# while the loop was held up, bench scale at 100 000 files). Behind the log is what it allows.
WITNESS_EVERY_S = 0.1


@dataclass
class Draft:
    """What a decision wants logged. `rows` are other rows committed in the same transaction;
    `result` turns the appended entry into the method's answer and has no other effect;
    `after_commit` runs once the entry is durable, before the answer, never when the commit
    failed: whatever makes the entry effective outside the log (a token usable, the queue woken).
    `after_failed_commit` runs when the commit failed, once the replay that follows has made the
    state the durable log's again (a commit cut short may have committed all the same: the state
    says): it puts back what the decision did outside the state that the log does not hold."""
    actor: dict
    op: dict
    decision: dict
    human: dict | None = None
    facts: dict | None = None
    evidence: list = field(default_factory=list)
    symbols_engine: int | None = None
    rows: list[SQLModel] = field(default_factory=list)
    result: Callable[[dict], dict] | None = None
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    after_failed_commit: list[Callable[[], None]] = field(default_factory=list)
    # A session whose heartbeat this is, answered once applied, before its commit, when no entry
    # in flight may have changed that session's records: a crash before the commit loses the beat
    # and nothing else (docs/decisions.md, "A heartbeat answered before its commit").
    answer_early: str | None = None


def allow(*reasons: str) -> dict:
    return {"outcome": "allow", "reasons": list(reasons)}


def deny(*reasons: str) -> dict:
    """A denial, each reason once, in the order first given."""
    return {"outcome": "deny", "reasons": list(dict.fromkeys(reasons))}


class LogWriter:
    def __init__(self, engine: Engine, keys: DaemonKeys, state: State, now_ms: Callable[[], int],
                 on_failure: Callable[[], None], witness: Path):
        self.engine = engine
        self.witness = witness  # the folder of each log's head witness (lonca.audit)
        self.db_name = engine.url.render_as_string(hide_password=True)
        self.broken: str | None = None  # why the state is ahead of the log, until a replay succeeds
        self.keys = keys  # each repository is signed with the key its log is on
        self.state = state
        self.now_ms = now_ms
        self.on_failure = on_failure
        self._pending: list[tuple[str, Callable[[], Draft], asyncio.Future]] = []
        self._quick: list[tuple[str, Callable[[], Draft], asyncio.Future]] = []  # decided first (append)
        # Heartbeats decided, applied and answered while a batch commits (append): the first
        # entries of the next batch, lost with the one below them if its commit fails.
        self._ahead: list[tuple[dict, Ed25519PrivateKey, Draft]] = []
        self._committing = False
        self._wake = asyncio.Event()
        self._appended = asyncio.Condition()
        # Entries are applied to the state as they are decided and become durable a commit
        # later: readers wait for what was applied when they came (never a dirty read).
        self._applied = 0
        self._durable = 0
        # (applied count, repo, footprint) of each entry applied and not yet durable (settled_for)
        self._in_flight: list[tuple[int, str, footprint.Footprint | None]] = []
        self.failures = 0   # commits failed so far: a read that began before one refuses its answer
        self.durable_next: dict[str, int] = {}  # repo -> the seq after its last durable entry
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lonca-log")
        self._witness_lock = threading.Lock()
        self._witness_owed: dict[str, dict] = {}  # repo -> its last durable entry's row (under the lock)
        self._witness_queued = False               # a write is queued or running (under the lock)
        self._witness_at = 0.0                     # when the last write began (the witness thread's)
        self._witnesses = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lonca-witness")
        self._task: asyncio.Task | None = None

    def start(self, on_fatal) -> None:
        self._task = supervise("log writer", self._run(), on_fatal)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        self._db.shutdown(wait=True)
        self._witnesses.shutdown(wait=True)     # the last commits' witness, queued by them

    def down(self, cause: str | None = None) -> LoncaError:
        """The answer while the database fails."""
        return LoncaError("internal", f"the database {self.db_name} failed ({cause or self.broken}); nothing more was "
                                      "written. The worker reconnects by itself: send the request again shortly "
                                      "(read the log first if it was a write: it may have been committed)")

    async def on_db(self, fn):
        """Run `fn` on the database thread, after the commits queued before it; a database
        failure is logged (its cause) and answered as `down`."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._db, fn)
        except SQLAlchemyError as e:
            cause = db_cause(e)
            log.error("the database %s failed: %s", self.db_name, cause)
            raise self.down(cause) from None

    async def append(self, repo: str, decide: Callable[[], Draft], quick: bool = False) -> dict:
        """Decide and log; returns {"seq", "decision", **the draft's result}. A LoncaError raised
        by `decide` is the answer and nothing is logged. `quick`: a decision of a few µs whose
        caller waits on the answer to go on (a heartbeat): decided before the entries queued
        ahead of it, and one queued while a batch is decided joins that batch at its next turn
        instead of waiting for the next. Requests in flight together may be logged in either
        order: none was answered before the other was sent."""
        if self.broken:
            raise self.down()
        if quick and self._committing:
            answer = self._ahead_of_commit(repo, decide)
            if answer is not None:
                return answer
        fut = asyncio.get_running_loop().create_future()
        (self._quick if quick else self._pending).append((repo, decide, fut))
        self._wake.set()
        return await fut

    def _ahead_of_commit(self, repo: str, decide: Callable[[], Draft]) -> dict | None:
        """While a batch commits, a heartbeat that may be answered before its commit is decided,
        applied and answered now, without waiting for that commit: the commit it waited for held
        the beat tens of ms under integration load (docs/decisions.md, "A heartbeat answered
        before its commit"). None when it may not be; the writer then decides it again in its
        turn, which a quick decision allows (it has no effect of its own)."""
        try:
            draft = decide()    # a LoncaError is the answer, as when the writer decides it
        except LoncaError:
            raise
        except Exception:   # a bug: the writer decides it again, and logs and answers it as it does any
            return None
        if draft.answer_early is None or self._touched(repo, draft.answer_early):
            return None
        row, entry, signer = self._entry(repo, draft)
        self._ahead.append((row, signer, draft))
        self._wake.set()
        answer = self._answer(repo, entry, draft)
        if isinstance(answer, LoncaError):
            raise answer
        return answer

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

    async def settled(self, since: int | None = None) -> None:
        """Until every entry applied so far is durable (at most the batch being committed);
        `down` when that batch failed and the state is not the log's yet. A read that reads the
        state again after an await calls it after its last read, with `since` the `failures`
        when it began: `down` too when a commit failed since, as a replay may have come between
        and the answer may show an entry it lost (settled_for says the same for a path's reads)."""
        await self._durable_to(self._applied, since)

    async def settled_for(self, repo: str, paths: set[str], sessions: set[str], since: int) -> None:
        """Until every entry in flight that changed `paths` or `sessions` of `repo` (or may have
        changed more: service/footprint.py) is durable. Called by a read after the last of its
        reads of the state, which must be of nothing else of the state, with `since` the
        `failures` when it began (before its credential was checked): `down` when a commit failed
        since, as the answer may show an entry it lost. Entries in flight on other paths are not
        waited for: under load some batch always is (docs/decisions.md, "A preview waits only for
        the entries in flight on its paths")."""
        target = max((i for i, r, fp in self._in_flight if r == repo and (fp is None or fp.meets(paths, sessions))),
                     default=0)
        await self._durable_to(target, since)

    async def _durable_to(self, target: int, since: int | None) -> None:
        """Until the first `target` entries applied are durable: `down` when the batch holding
        them failed, or, given `since` (the `failures` when a read began), when any commit failed
        since. A read that began while the writer was broken is refused before it reads
        (Daemon.handle), so a failure after it began is one `failures` counts."""
        if self._durable < target:
            async with self._appended:
                await self._appended.wait_for(lambda: self._durable >= target or self.broken)
            if self._durable < target:
                raise self.down()
        if since is not None and self.failures != since:
            raise self.down(self.broken or "a batch of entries was not committed")

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._write_batch()

    async def _write_batch(self) -> None:
        batch = deque(self._quick + self._pending)
        self._quick, self._pending = [], []
        ahead, self._ahead = self._ahead, []    # decided first, answered already
        entries: list[dict] = [row for row, _, _ in ahead]
        signers: list[Ed25519PrivateKey] = [signer for _, signer, _ in ahead]
        rows: list[SQLModel] = [r for _, _, draft in ahead for r in draft.rows]
        answers: list[tuple[asyncio.Future | None, dict | LoncaError, Draft, int]] = [
            (None, {}, draft, row["seq"]) for row, _, draft in ahead]
        turn = time.perf_counter()
        while batch:
            if time.perf_counter() - turn > TURN_S:     # a long batch lets the loop answer between entries
                await asyncio.sleep(0)
                turn = time.perf_counter()
                if self._quick:     # came meanwhile: decided now, ahead of the rest, committed with it
                    batch.extendleft(reversed(self._quick))
                    self._quick = []
            repo, decide, fut = batch.popleft()
            try:
                draft = decide()
                early = draft.answer_early is not None and not self._touched(repo, draft.answer_early)
                row, entry, signer = self._entry(repo, draft)
            except LoncaError as e:
                fut.set_exception(e)
                continue
            except Exception as e:  # a bug in a decision must not stop the writer
                log.exception("a decision for %s failed", repo)
                fut.set_exception(LoncaError("internal", f"the daemon failed to decide: {type(e).__name__}"))
                continue
            entries.append(row)  # applied: it is committed with the batch whatever follows
            signers.append(signer)
            rows.extend(draft.rows)
            answer = self._answer(repo, entry, draft)
            if early and not isinstance(answer, LoncaError):
                fut.set_result(answer)     # the commit below skips a future already answered
            answers.append((fut, answer, draft, entry["seq"]))
        if not entries:
            return
        # changes the batch settled and the trunks it made, written with it (service/settled.py,
        # service/trunk_history.py): a record encoded on the database thread, as a settled record no
        # longer changes
        touched = [self.state.repos[name] for name in dict.fromkeys(e["repo"] for e in entries) if name in self.state.repos]
        settled = [(rs.name, *held) for rs in touched for held in rs.settled.to_write()]
        trunks = trunk_store.pending_rows(touched)
        upto = self._applied    # what this commit makes durable: heartbeats may be applied on top meanwhile
        try:
            await self._committed(entries, signers, rows, settled, trunks)
        except Exception as e:
            self.broken = db_cause(e)
            self.failures += 1
            log.error("committing %d log entries to %s failed", len(entries), self.db_name, exc_info=True)
            for fut, *_ in answers:
                if fut is not None and not fut.done():
                    fut.set_exception(self.down())
            self._ahead = []    # chained on the batch that failed: lost with it, as in a crash (the replay drops them)
            await self._recover()
            for _, _, draft, seq in answers:
                try:
                    for undo in draft.after_failed_commit:
                        undo()
                except Exception:  # what is left behind is the operator's to clear; the writer goes on
                    log.exception("putting back what the entry %d of the failed commit did failed", seq)
            return
        for rs in touched:
            rs.settled.written((c, seq) for name, c, seq, _ in settled if name == rs.name)
        trunk_store.mark_written(touched, trunks)
        self._durable = upto
        self._in_flight = [f for f in self._in_flight if f[0] > upto]   # the heartbeats applied on top stay
        for e in entries:
            self.durable_next[e["repo"]] = max(self.durable_next.get(e["repo"], 1), e["seq"] + 1)
        for fut, answer, draft, seq in answers:
            try:
                for effect in draft.after_commit:
                    effect()
            except Exception as e:  # durable all the same: the answer says so
                log.exception("an effect of the logged entry %d failed", seq)
                answer = LoncaError("internal", f"the entry was logged at seq {seq} but its effect failed: {type(e).__name__}")
            if fut is None or fut.done():
                continue
            if isinstance(answer, LoncaError):
                fut.set_exception(answer)
            else:
                fut.set_result(answer)
        async with self._appended:
            self._appended.notify_all()

    @staticmethod
    def _answer(repo: str, entry: dict, draft: Draft) -> dict | LoncaError:
        """What a logged entry answers: its seq and decision and what the method adds, or
        `internal` when that fails (the entry is logged all the same)."""
        answer = {"seq": entry["seq"], "decision": entry["decision"]}
        try:
            if draft.result:
                answer.update(draft.result(entry))
        except Exception as e:
            log.exception("the answer to a logged entry of %s failed", repo)
            return LoncaError("internal", f"the entry was logged at seq {entry['seq']} but its answer failed: {type(e).__name__}")
        return answer

    async def _committed(self, *batch) -> None:
        """The batch committed on the database thread; heartbeats meanwhile go _ahead_of_commit
        (whatever ends the commit, a failure or the writer cancelled, ends that)."""
        self._committing = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._db, self._commit, *batch)
        finally:
            self._committing = False

    def _touched(self, repo: str, session: str) -> bool:
        """Whether an entry of `repo` applied and not yet durable may have changed the session's
        records or lease sets (its footprint, or None: anything)."""
        return any(r == repo and (fp is None or fp.meets(set(), {session})) for _, r, fp in self._in_flight)

    async def _recover(self) -> None:
        """Wake every waiter with `down`, then replay the durable logs on the database thread
        (the event loop goes on answering meanwhile; the new state is swapped in at the end),
        retried with backoff until the database answers."""
        loop = asyncio.get_running_loop()
        wait, longest = RECOVER_BACKOFF_S
        while True:
            for _, _, fut in self._quick + self._pending:  # queued before the failure: refused like the rest
                if not fut.done():
                    fut.set_exception(self.down())
            self._quick, self._pending = [], []
            async with self._appended:
                self._appended.notify_all()
            try:
                await loop.run_in_executor(self._db, self.on_failure)
                break
            except (SQLAlchemyError, OSError) as e:  # the database is still away; anything else (a log
                self.broken = db_cause(e)              # that does not verify, a bug) stops the worker
                log.warning("replaying the logs from %s failed (%s); trying again in %.1f s", self.db_name, self.broken, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, longest)
        self.durable_next = {name: rs.next_seq for name, rs in self.state.repos.items()}
        self._durable = self._applied
        self._in_flight.clear()
        log.warning("the logs were replayed from %s: the worker writes again", self.db_name)
        self.broken = None
        async with self._appended:
            self._appended.notify_all()

    def _entry(self, repo: str, d: Draft) -> tuple[dict, dict, Ed25519PrivateKey]:
        rs = self.state.repo(repo)
        seq, prev = (rs.next_seq, rs.head_hash) if rs else (1, ZERO_HASH)
        entry = {
            "format": LOG_FORMAT, "seq": seq, "prev": prev, "time_ms": self.now_ms(),
            "actor": d.actor, "op": d.op, "evidence": d.evidence, "facts": d.facts,
            "symbols_engine": d.symbols_engine, "decision": d.decision, "human": d.human,
        }
        text = canonical_text(entry)     # the row's text; its UTF-8 is what is hashed
        hash_hex = sha256_hex(text.encode())
        # the key this repository's log is on, taken now: an entry applied after it (daemon.rotate)
        # may move the repository to the next key before this one is signed; a daemon.recover
        # is signed with the key it adopts the log with (the old one is not held here)
        on = d.op["key"] if d.op["op"] == "daemon.recover" else rs.daemon_key if rs else d.op["daemon_key"]
        signer = self.keys.signer(on)
        fp = footprint.apply(self.state, repo, entry, hash_hex)
        self._applied += 1
        self._in_flight.append((self._applied, repo, fp))
        return {"repo": repo, "seq": seq, "entry": text, "hash": hash_hex}, entry, signer

    def _commit(self, entries: list[dict], signers: list[Ed25519PrivateKey], rows: list[SQLModel],
                settled: list[tuple], trunks: list[dict]) -> None:
        """On the database thread. Each entry is signed here, not as it is decided: nothing reads
        a signature before the commit. (cryptography's Ed25519 `sign` holds the GIL all the same:
        it costs the loop as much here as on it, docs/decisions.md "Lease requests: less CPU".)"""
        for e, signer in zip(entries, signers):
            e["sig"] = signer.sign(bytes.fromhex(e["hash"])).hex()
        settled_rows = [settled_store.row(*held) for held in settled]
        if rows:
            with Session(self.engine) as s:
                s.connection().execute(LOG_INSERT, entries)
                settled_store.write(s.connection(), settled_rows)
                trunk_store.write(s.connection(), trunks)
                for row in rows:
                    s.merge(row)
                s.commit()
        else:   # the leases' entries: no Session (its bookkeeping cost more than the insert itself)
            with self.engine.begin() as conn:
                conn.execute(LOG_INSERT, entries)
                settled_store.write(conn, settled_rows)
                trunk_store.write(conn, trunks)
        with self._witness_lock:
            self._witness_owed.update((e["repo"], e) for e in entries)  # the last of each repository's
            queued, self._witness_queued = self._witness_queued, True
        if not queued:
            self._witnesses.submit(self._write_witness)

    def _write_witness(self) -> None:
        """On the witness thread: the witness of each log committed since the last one, at most
        once a WITNESS_EVERY_S (what commits meanwhile goes in the same write)."""
        time.sleep(max(0.0, self._witness_at + WITNESS_EVERY_S - time.monotonic()))
        with self._witness_lock:
            owed, self._witness_owed = self._witness_owed, {}
            self._witness_queued = False
        self._witness_at = time.monotonic()
        try:
            for repo, e in owed.items():
                write_witness(self.witness, repo, e["seq"], e["hash"], e["sig"])
        except OSError as e:  # the entries are durable: a stale witness is behind the log, which it allows
            log.error("the witness of the logs in %s could not be written: %s", self.witness, e)
