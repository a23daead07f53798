"""The worker: opens the store, replays and checks every log, and serves the socket."""
import asyncio
import json
import logging
import os
import signal
import sys
import time
from dataclasses import replace

import pygit2
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session, select

from lonca.audit import ChainVerifier, read_witnesses, witness_problem
from lonca.database_errors import database_problem
from lonca.protocol import LoncaError
from lonca.queue.checks import DIE_WITH_WORKER, reap_leftovers, record_in
from lonca.symbols import SymbolCache

from . import auth, checkpoint, daemonkey, gitstore, heap, schemas, settled_store, store as db, trunk_store, worker_lock
from . import security_methods
from .event_methods import Told
from .hook_methods import HookSeen
from .change_build import TreeMaps
from .cedar_policy import load as load_cedar
from .policy import Policy, load as load_policy
from .queue_runner import QueueRunner
from .running_checks import RunningChecks
from .ratelimit import RateLimiter, rate_limited
from .config import Config
from .context import Context
from .log import LogWriter
from .method_table import METHODS
from .methods import Call
from .server import Peer, SocketServer
from .state import State
from .status_parts import StatusParts
from .symbol_store import SqliteTables
from .symbol_warmer import SymbolWarmer
from .tree_manifest import Manifests
from .store import CheckpointRow, LogRow, NonceRow, TokenRow, open_engine, repos_in_log
from .store_packer import StorePacker
from .supervision import WorkerStops, supervise

log = logging.getLogger("lonca.daemon")
REPLAY_PAGE = 5000
STOP_S = 10.0  # a graceful stop is bounded: what is still running after this is abandoned
SWITCH_S = 0.001  # the GIL switch interval the worker runs with (serve says why)
# proposal builds that run at once on the default thread pool: each more thread running Python makes
# the loop's every take-back of the GIL longer, on two cores with one GIL it adds little
# (docs/decisions.md, "At most two proposal builds at once")
BUILDS_AT_ONCE = 2
SWEEP_TURN = 256  # tokens the sweep looks at between turns of the loop


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        self.engine = None
        self.state = State(self.policy_of)
        self.tokens = auth.Tokens([])
        self._stores = gitstore.ThreadHandles(config.store_path, lambda repo: self.packer.generation(repo))
        gitstore.limit_caches()
        self._policies: dict[tuple[str, str], Policy] = {}
        self.tree_maps = TreeMaps()
        self.manifests = Manifests(self.tree_maps)
        self.symbols = SymbolCache()
        self.warmer = SymbolWarmer(self.symbols, self.store, self.tree_maps)
        self.packer = StorePacker(config.store_path, merged=self._stores.let_go)
        self.rate = RateLimiter()
        self.told: dict[tuple[str, str], Told] = {}  # inbox: what each live session was told (memory only)
        self.hooks: dict[tuple[str, str], HookSeen] = {}  # hook events of each live session (memory only)
        self.agent_uids: dict[str, set[int]] = {}  # repo -> users its agents connect as (lonca doctor)
        self.started_ms = self.now_ms()
        self.verifying: set[str] = set()  # changes whose checks are running
        self.running = RunningChecks(self.now_ms)  # and what they print so far (queue.running)
        self.builds = asyncio.Semaphore(BUILDS_AT_ONCE)
        self._checkpointed: dict[str, int] = {}  # repo -> seq of its last checkpoint
        self.queue = QueueRunner(self)
        self.server = SocketServer(config.socket, config.limits, self.handle, config.allowed_uids, config.socket_group)
        self.stopping = asyncio.Event()
        self.failed: str | None = None  # the background task whose failure stopped the worker
        self._locks: list = []  # held for the worker's life (see worker_lock)
        self.db_lock: worker_lock.DatabaseLock | None = None

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.config.clock_offset_ms

    # -- start ---------------------------------------------------------------------------------

    async def start(self) -> None:
        started = time.time()
        heap.tune()
        url = self.config.database_url
        sqlite_file = db.sqlite_file(url)
        self._prepare_home(sqlite_file)
        self._locks.append(worker_lock.lock_file(self.config.home / "worker.lock", f"the home {self.config.home}"))
        db.check_writable(url)
        if sqlite_file is not None and sqlite_file.resolve().parent != self.config.home.resolve():
            self._locks.append(worker_lock.lock_file(sqlite_file.with_name(sqlite_file.name + ".worker-lock"),
                                                     f"the database {sqlite_file}"))
        try:
            self.engine = await asyncio.to_thread(open_engine, url)
            if self.engine.url.get_backend_name() == "postgresql":
                self.db_lock = worker_lock.DatabaseLock(self.engine.url, self.engine.url.render_as_string(hide_password=True))
                await asyncio.to_thread(self.db_lock.acquire)
            # the keys the logs end on, to name the one to restore when the key file is missing
            logged = {} if self.config.key_path.exists() else await asyncio.to_thread(db.daemon_keys_in_log, self.engine)
            self.keys = daemonkey.DaemonKeys(self.config.key_path, daemonkey.load_or_create(self.config.key_path, logged))
            self.symbols.store = await asyncio.to_thread(SqliteTables, self.config.home / "symbols.db")
            checks_dir = self.config.home / "checks"
            killed = reap_leftovers(checks_dir)
            if killed:
                log.warning("killed %d processes of checks a previous worker left running", killed)
            record_in(checks_dir)
            if not DIE_WITH_WORKER:
                log.warning("setpriv (util-linux) is not on PATH: a check outlives a SIGKILL of the worker until its next start")
            await asyncio.to_thread(self._replay, started)
            # a rotation whose last daemon.rotate committed before the key file moved
            self.keys.promote_if_done(sum(1 for rs in self.state.repos.values() if rs.daemon_key == self.keys.public))
        except DatabaseError as e:
            raise database_problem(e, self.engine.url.render_as_string(hide_password=True) if self.engine else url) from None
        self.log = LogWriter(self.engine, self.keys, self.state, self.now_ms, self._replay, self.config.witness_dir)
        self.log.durable_next = {name: rs.next_seq for name, rs in self.state.repos.items()}
        self.log.start(self._fatal)
        self.ctx = Context(config=self.config, state=self.state, log=self.log, now_ms=self.now_ms, store=self.store,
                           policy_text=self.policy_text, tree_maps=self.tree_maps,
                           manifests=self.manifests, symbols=self.symbols,
                           warmer=self.warmer, tokens=self.tokens, rate=self.rate, refused=self.server.refused,
                           told=self.told, verifying=self.verifying, queue_wake=self.queue_wake, engine=self.engine,
                           db_write=self.db_write, db_get=self.db_get, keys=self.keys,
                           hooks=self.hooks, started_ms=self.started_ms, agent_uids=self.agent_uids,
                           status_parts=StatusParts(self.hooks), running=self.running,
                           builds=self.builds)
        heap.freeze()   # the modules and the replayed state last as long as the worker
        await self.server.start()
        self._sweeper = supervise("sweeper", self._sweep(), self._fatal)
        self.queue.start(self._fatal)
        for name, rs in self.state.repos.items():   # a restart warms trunk from the tables on disk
            self.warmer.ask(name, rs.trunk)
            self.packer.nudge(name)

    def _prepare_home(self, sqlite_file) -> None:
        """The home is made 0700. One made by someone else is never chmod-ed; it is refused when it
        holds the SQLite database (`sqlite_file`) and group or others may read it."""
        home = self.config.home
        if not home.exists():
            home.mkdir(parents=True, mode=0o700)
            os.chmod(home, 0o700)  # mkdir's mode passes through the umask
        mode = home.stat().st_mode & 0o777
        if sqlite_file is not None and sqlite_file.resolve().parent == home.resolve() and mode & 0o077:
            raise LoncaError("forbidden", f"LONCA_HOME {home} holds the database and its mode {mode:o} lets group or others "
                                          f"into it; make it private (chmod 700 {home}) and start again")
        self.config.repos_dir.mkdir(exist_ok=True, mode=0o700)
        self.config.witness_dir.mkdir(exist_ok=True, mode=0o700)

    def _fatal(self, task: str) -> None:
        self.failed = self.failed or task
        self.stopping.set()

    def _replay(self, started: float | None = None) -> None:
        """State is the replay of the logs, each checked against its chain; a log that does not
        verify stops the start (`integrity`). `started`: the worker's start, at start."""
        state = State(self.policy_of, settled_store.TableReader(self.engine), trunk_store.TableReader(self.engine))
        saved: dict[str, int] = {}
        witnesses = read_witnesses(self.config.witness_dir)
        with Session(self.engine) as s:
            logged = repos_in_log(self.engine)
            for repo in logged:
                verifier, seq = self._resume(s, repo, state)
                saved[repo] = seq - 1
                witness = witnesses.get(repo)
                at_witness = None
                while True:
                    rows = s.exec(select(LogRow).where(LogRow.repo == repo, LogRow.seq >= seq)
                                  .order_by(LogRow.seq).limit(REPLAY_PAGE)).all()
                    for row in rows:
                        problem = verifier.check(row.entry, row.hash, row.sig)
                        if problem:
                            raise LoncaError("integrity", f"the log of {repo} does not verify at {problem}; "
                                                          "run `lonca audit verify` and restore from a backup")
                        state.apply(repo, json.loads(row.entry), row.hash)
                        if witness and row.seq == witness["seq"]:
                            at_witness = row.hash
                    if started is not None:
                        # at start, what the replay settled and made trunk goes to its tables page by page (most rows
                        # are there: their entries are durable), so its memory stays a page's; a
                        # recovery writes nothing (the database may take reads only): the log
                        # writer's next commit of the repository writes what is left
                        settled = settled_store.pending_rows([state.repos[repo]])
                        settled_store.write(s.connection(), settled)
                        trunks = trunk_store.pending_rows([state.repos[repo]])
                        trunk_store.write(s.connection(), trunks)
                        s.commit()
                        settled_store.mark_written([state.repos[repo]], settled)
                        trunk_store.mark_written([state.repos[repo]], trunks)
                    if len(rows) < REPLAY_PAGE:
                        break
                    seq = rows[-1].seq + 1
                if witness and at_witness is None and witness["seq"] <= saved[repo]:
                    at = s.get(LogRow, (repo, witness["seq"]))  # behind the checkpoint: not replayed
                    at_witness = at.hash if at else None
                problem = witness and witness_problem(witness, state.repos[repo].next_seq - 1, at_witness, verifier.daemon_key)
                if problem:
                    raise LoncaError("integrity", f"the log of {repo}: {problem} (witness {self.config.witness_dir})")
                self._check_store(repo, state, started)
                rs = state.repos[repo]
                if rs.next_seq - 1 - saved[repo] >= checkpoint.EVERY:
                    s.merge(checkpoint.row(checkpoint.snapshot(state, rs)))
                    s.commit()
                    saved[repo] = rs.next_seq - 1
            gone = sorted(set(witnesses) - set(logged))
            if gone:
                raise LoncaError("integrity", f"the log of {gone[0]} is gone but its witness in {self.config.witness_dir} "
                                              f"records seq {witnesses[gone[0]]['seq']}; restore the database from a backup")
            now = self.now_ms()
            for n in s.exec(select(NonceRow).where(NonceRow.expires_ms > now)):
                state.nonces[n.nonce] = n.expires_ms
            tokens = list(s.exec(select(TokenRow).where(TokenRow.expires_ms > now, TokenRow.ended == False)))  # noqa: E712
        self.state.__dict__.update(state.__dict__)
        self.tokens.rows = auth.Tokens(tokens).rows  # in place: the methods' Context holds this object
        self._checkpointed = saved

    def _resume(self, s: Session, repo: str, state: State) -> tuple[ChainVerifier, int]:
        """(verifier, first seq to replay): after the repository's checkpoint when it covers the
        log's entry at its seq, else from seq 1."""
        cp = s.get(CheckpointRow, repo)
        at = s.get(LogRow, (repo, cp.seq)) if cp else None
        data = checkpoint.usable(cp, at.hash if at else None)
        if data is None:
            if cp:
                log.warning("%s: the checkpoint at %d does not match the log; replaying it whole", repo, cp.seq)
            return ChainVerifier(repo), 1
        rs = checkpoint.load(state, data)
        return ChainVerifier.after(repo, cp.seq, cp.hash, rs.daemon_key, rs.humans, rs.recovery), cp.seq + 1

    async def checkpoint(self, min_entries: int) -> None:
        """Save the state of each repository that moved on by `min_entries` since its checkpoint
        and has no entry applied that is not durable yet (a snapshot taken at once on the loop:
        consistent; encoded on a thread, as it costs what the state holds)."""
        snaps = []
        for name, rs in self.state.repos.items():
            seq = rs.next_seq - 1
            if seq - self._checkpointed.get(name, 0) >= min_entries and self.log.durable_next.get(name) == rs.next_seq:
                snaps.append(checkpoint.snapshot(self.state, rs))
                self._checkpointed[name] = seq
        if snaps:
            try:
                await self.db_write(await asyncio.to_thread(lambda: [checkpoint.row(snap) for snap in snaps]))
            except Exception:  # a cache of the log: the next start replays a little more
                log.exception("a checkpoint could not be saved")
                self._checkpointed.update({snap.repo: 0 for snap in snaps})

    def _check_store(self, repo: str, state: State, started: float | None) -> None:
        """The store exists, and trunk's ref names what the last integration logged: a crash
        between the entry and the ref is repaired from the log, the truth. At start, a lock of
        the ref older than the worker that no process holds is a leftover of a kill: removed, and
        the HEAD of a store made before gitstore.init_store named trunk is pointed at trunk."""
        path = self.config.store_path(repo)
        if not path.exists():
            raise LoncaError("integrity", f"the git store of {repo} is missing at {path}")
        if started is not None and not gitstore.clear_stale_trunk_lock(path, started):
            raise LoncaError("git", f"trunk's ref of {repo} is locked by a running process ({gitstore.trunk_lock(path)}); "
                                    "let it finish (or stop it) and start the worker again")
        store = gitstore.open_store(path)
        if started is not None and gitstore.head_to_trunk(store):
            log.info("%s: the store's HEAD names trunk (%s) now, so a clone of it checks trunk out", repo, gitstore.TRUNK_REF)
        want = state.repos[repo].trunk
        found = gitstore.trunk(store)
        if found != want and state.repos[repo].trunks.position(found) is None:
            log.error("%s: trunk's ref names %s, which was never trunk: it was moved outside Lonca; the merge queue "
                      "logs it (import.unmediated) and sets it back", repo, found)
        elif found != want:
            log.warning("%s: trunk's ref was not the last integration's; set back to %s", repo, want)
            try:
                gitstore.move_trunk(store, path, want)
            except pygit2.GitError as e:
                raise LoncaError("git", f"trunk's ref of {repo} cannot be set back to {want}: {e}") from None

    def policy_text(self, repo: str, commit_id: str, name: str = "lonca.toml") -> str | None:
        """lonca.toml (or policy.cedar) of a commit in the repository's store, None when absent."""
        if not self.config.store_path(repo).exists():
            return None
        return gitstore.policy_text(self.store(repo), commit_id, name)

    def policy_of(self, repo: str, commit_id: str) -> Policy:
        """The policy of a commit, lonca.toml and policy.cedar, each parsed once per commit."""
        key = (repo, commit_id)
        if key not in self._policies:
            policy = load_policy(self.policy_text(repo, commit_id))
            self._policies[key] = replace(policy, cedar=load_cedar(self.policy_text(repo, commit_id, "policy.cedar")))
        return self._policies[key]

    def queue_wake(self) -> None:
        self.queue.wake.set()

    def store(self, repo: str) -> pygit2.Repository:
        """This thread's handle on the repository's store (gitstore.ThreadHandles)."""
        return self._stores.get(repo)

    # -- the database outside the log -------------------------------------------------------

    async def db_write(self, rows: list) -> None:
        def write():
            with Session(self.engine) as s:
                for r in rows:
                    s.merge(r)
                s.commit()
        await self.log.on_db(write)

    async def db_get(self, model, key):
        def get():
            with Session(self.engine) as s:
                return s.get(model, key)
        return await self.log.on_db(get)

    async def _sweep(self) -> None:
        """Forget tokens of sessions that are over, a few seconds after they end, and spent nonces
        of stale signatures; give the C heap's free pages back now and then (heap.release)."""
        released = time.monotonic()
        while True:
            await asyncio.sleep(self.config.limits.token_sweep_s)
            if time.monotonic() - released >= heap.RELEASE_EVERY_S:
                await asyncio.to_thread(heap.release)
                released = time.monotonic()
            if self.db_lock is not None:
                try:
                    await asyncio.to_thread(self.db_lock.keep)
                except LoncaError as e:
                    raise WorkerStops("database lock", e.message) from None
            now = self.now_ms()
            self.state.forget_spent_nonces(now)
            for k in [k for k in self.told if not self._live(*k)]:  # in place: the Context holds this dict
                del self.told[k]
            for k in [k for k in self.hooks if not self._live(*k)]:
                del self.hooks[k]
            await self.checkpoint(checkpoint.EVERY)
            gone = []
            for i, (h, row) in enumerate(list(self.tokens.rows.items()), 1):
                if i % SWEEP_TURN == 0:     # 1 000 agents' tokens held the loop 10-20 ms a sweep (py-spy)
                    await asyncio.sleep(0)
                rs = self.state.repo(row.repo) if row.kind == "agent" else None
                rec = rs.sessions.get(row.session) if rs else None
                over = row.expires_ms <= now or row.ended or (row.kind == "agent" and (rec is None or not rec.active(now)))
                if over:
                    gone.append(h)
            if gone:
                for h in gone:
                    self.tokens.rows.pop(h, None)
                try:
                    await self._delete_tokens(gone)
                except LoncaError:
                    pass  # logged by on_db; the rows are deleted at a later sweep or ignored as expired

    def _live(self, repo: str, session: str) -> bool:
        rs = self.state.repo(repo)
        return rs is not None and session in rs.live_sessions

    async def _delete_tokens(self, hashes: list[str]) -> None:
        def delete():
            with Session(self.engine) as s:
                for h in hashes:
                    row = s.get(TokenRow, h)
                    if row:
                        s.delete(row)
                s.commit()
        await self.log.on_db(delete)

    # -- requests -----------------------------------------------------------------------------

    async def handle(self, peer: Peer, req: dict) -> dict:
        rid = req["id"]
        m = METHODS.get(req["method"])
        try:
            if m is None:
                raise LoncaError("unknown_method", f"{req['method']!r} is not a method of protocol 1")
            if m.path_scoped:   # it waits itself for what it reads (LogWriter.settled_for)
                if self.log.broken:     # but the state holds entries the replay will undo
                    raise self.log.down()
            # ping reads no state: it answers in an outage
            elif not m.writes and self.log.dirty and m.name != "ping":
                await self.log.settled()  # a reader answers from durable state only
            who, repo = auth.check(m.credential, m.name, req, self.tokens, self.state, self.now_ms())
            if who is not None and who.kind == "agent" and repo:
                self.agent_uids.setdefault(repo, set()).add(peer.uid)
            if rate_limited(m, who):
                self.rate.check(self.state.repo(repo), who.session, self.now_ms())
            schemas.check(m.name, req["params"])  # the request is already strict I-JSON (wire_json)
            result = await m.fn(Call(self.ctx, peer, m.name, req["params"], repo, who, req.get("token")))
            return {"id": rid, "ok": True, "result": result}
        except LoncaError as e:
            security_methods.note(peer, req, e)
            return {"id": rid, "ok": False, "error": e.to_json()}
        except Exception:
            log.exception("method %s failed", req["method"])
            return {"id": rid, "ok": False, "error": {"code": "internal", "message": "the daemon failed on this request; see its log"}}

    async def stop(self) -> None:
        """Bounded: the running checks are killed, connections closed, the last batch committed."""
        self._sweeper.cancel()
        await self.queue.stop()
        await self.server.close()
        if self.failed != "log writer" and not self.log.broken:  # else nothing will settle it
            await self.log.settled()
            await self.checkpoint(1)  # the next start replays nothing
        await self.log.stop()
        self.warmer.close()
        if self.symbols.store is not None:
            self.symbols.store.close()
        self.engine.dispose()
        if self.db_lock is not None:
            self.db_lock.release()


async def serve(config: Config, ready=None) -> None:
    """Until SIGINT or SIGTERM, or a background task fails (then `internal`: a non-zero exit)."""
    # The loop gives the GIL away at every socket read and write and every wait; while a thread
    # runs Python (facts, merges, a warm) each take back costs up to the switch interval, 5 ms by
    # default, many times a request (docs/decisions.md, "The worker's threads and the GIL").
    sys.setswitchinterval(SWITCH_S)
    daemon = Daemon(config)
    await daemon.start()
    if ready:
        ready(daemon)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, daemon.stopping.set)
    await daemon.stopping.wait()
    try:
        await asyncio.wait_for(daemon.stop(), STOP_S)
    except asyncio.TimeoutError:
        log.error("the worker did not stop within %.0f s; it exits anyway", STOP_S)
    if daemon.failed:
        raise LoncaError("internal", f"the worker's {daemon.failed} failed (the lines above say why) and the worker "
                                     "stopped; start it again (`lonca up` or your service manager does)")
