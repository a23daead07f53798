"""The worker: opens the store, replays and checks every log, and serves the socket."""
import asyncio
import json
import logging
import signal
import threading
import time

import pygit2
from sqlmodel import Session, select

from lonca.audit import ChainVerifier
from lonca.protocol import LoncaError
from lonca.symbols import SymbolCache

from . import auth, checkpoint, daemonkey, gitstore
from . import security_methods
from .event_methods import Told
from .hook_methods import HookSeen
from .change_build import TreeMaps
from .policy import Policy, load as load_policy
from .queue_runner import QueueRunner
from .ratelimit import RateLimiter, rate_limited
from .config import Config
from .log import LogWriter
from .method_table import METHODS
from .methods import Call
from .server import Peer, SocketServer
from .state import State
from .symbol_warmer import SymbolWarmer
from .store import CheckpointRow, LogRow, NonceRow, TokenRow, open_engine, repos_in_log

log = logging.getLogger("lonca.daemon")
REPLAY_PAGE = 5000


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        self.engine = None
        self.state = State(self.policy_of)
        self.tokens = auth.Tokens([])
        self._stores = threading.local()  # a pygit2 Repository is not safe to share between threads
        self._policies: dict[tuple[str, str], Policy] = {}
        self.tree_maps = TreeMaps()
        self.symbols = SymbolCache()
        self.warmer = SymbolWarmer(self.symbols, self.store)
        self.rate = RateLimiter()
        self.told: dict[tuple[str, str], Told] = {}  # inbox: what each live session was told (memory only)
        self.hooks: dict[tuple[str, str], HookSeen] = {}  # hook events of each live session (memory only)
        self.started_ms = self.now_ms()
        self.verifying: set[str] = set()  # changes whose checks are running
        self._checkpointed: dict[str, int] = {}  # repo -> seq of its last checkpoint
        self.queue = QueueRunner(self)
        self.server = SocketServer(config.socket, config.limits, self.handle, config.allowed_uids)

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.config.clock_offset_ms

    # -- start ---------------------------------------------------------------------------------

    async def start(self) -> None:
        self.config.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config.repos_dir.mkdir(exist_ok=True)
        self.key = daemonkey.load_or_create(self.config.key_path)
        self.public_key = daemonkey.public_hex(self.key)
        self.engine = await asyncio.to_thread(open_engine, self.config.database_url)
        await asyncio.to_thread(self._replay)
        self.log = LogWriter(self.engine, self.key, self.state, self.now_ms, self._reload)
        self.log.durable_next = {name: rs.next_seq for name, rs in self.state.repos.items()}
        self.log.start()
        await self.server.start()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        self.queue.start()

    def _replay(self) -> None:
        """State is the replay of the logs, each checked against its chain; a log that does not
        verify stops the start (`integrity`)."""
        state = State(self.policy_of)
        saved: dict[str, int] = {}
        with Session(self.engine) as s:
            for repo in repos_in_log(self.engine):
                verifier, seq = self._resume(s, repo, state)
                saved[repo] = seq - 1
                while True:
                    rows = s.exec(select(LogRow).where(LogRow.repo == repo, LogRow.seq >= seq)
                                  .order_by(LogRow.seq).limit(REPLAY_PAGE)).all()
                    for row in rows:
                        problem = verifier.check(row.entry, row.hash, row.sig)
                        if problem:
                            raise LoncaError("integrity", f"the log of {repo} does not verify at {problem}; "
                                                          "run `lonca audit verify` and restore from a backup")
                        state.apply(repo, json.loads(row.entry), row.hash)
                    if len(rows) < REPLAY_PAGE:
                        break
                    seq = rows[-1].seq + 1
                self._check_store(repo, state)
                rs = state.repos[repo]
                if rs.next_seq - 1 - saved[repo] >= checkpoint.EVERY:
                    s.merge(checkpoint.row(state, rs))
                    s.commit()
                    saved[repo] = rs.next_seq - 1
            now = self.now_ms()
            for n in s.exec(select(NonceRow).where(NonceRow.expires_ms > now)):
                state.nonces[n.nonce] = n.expires_ms
            tokens = list(s.exec(select(TokenRow).where(TokenRow.expires_ms > now, TokenRow.ended == False)))  # noqa: E712
        self.state.__dict__.update(state.__dict__)
        self.tokens = auth.Tokens(tokens)
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
        return ChainVerifier.after(repo, cp.seq, cp.hash, rs.daemon_key, rs.humans), cp.seq + 1

    async def checkpoint(self, min_entries: int) -> None:
        """Save the state of each repository that moved on by `min_entries` since its checkpoint
        and has no entry applied that is not durable yet (taken at once on the loop: consistent)."""
        rows = []
        for name, rs in self.state.repos.items():
            seq = rs.next_seq - 1
            if seq - self._checkpointed.get(name, 0) >= min_entries and self.log.durable_next.get(name) == rs.next_seq:
                rows.append(checkpoint.row(self.state, rs))
                self._checkpointed[name] = seq
        if rows:
            try:
                await self.db_write(rows)
            except Exception:  # a cache of the log: the next start replays a little more
                log.exception("a checkpoint could not be saved")
                self._checkpointed.update({r.repo: 0 for r in rows})

    def _check_store(self, repo: str, state: State) -> None:
        """The store exists, and trunk's ref names what the last integration logged: a crash
        between the entry and the ref is repaired from the log, the truth."""
        path = self.config.store_path(repo)
        if not path.exists():
            raise LoncaError("integrity", f"the git store of {repo} is missing at {path}")
        store = gitstore.open_store(path)
        want = state.repos[repo].trunk
        if gitstore.trunk(store) != want:
            log.warning("%s: trunk's ref was not the last integration's; set back to %s", repo, want)
            store.references.create(gitstore.TRUNK_REF, pygit2.Oid(hex=want), force=True)

    def _reload(self) -> None:
        log.error("a log commit failed; replaying the logs to get back to what is durable")
        self._replay()

    def policy_text(self, repo: str, commit_id: str) -> str | None:
        """lonca.toml of a commit in the repository's store, None when absent."""
        if not self.config.store_path(repo).exists():
            return None
        return gitstore.policy_text(self.store(repo), commit_id)

    def policy_of(self, repo: str, commit_id: str) -> Policy:
        key = (repo, commit_id)
        if key not in self._policies:
            self._policies[key] = load_policy(self.policy_text(repo, commit_id))
        return self._policies[key]

    def queue_wake(self) -> None:
        self.queue.wake.set()

    def store(self, repo: str) -> pygit2.Repository:
        """This thread's handle on the repository's store."""
        handles = self._stores.__dict__.setdefault("by_repo", {})
        if repo not in handles:
            handles[repo] = gitstore.open_store(self.config.store_path(repo))
        return handles[repo]

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
        of stale signatures."""
        while True:
            await asyncio.sleep(self.config.limits.token_sweep_s)
            now = self.now_ms()
            self.state.forget_spent_nonces(now)
            self.told = {k: told for k, told in self.told.items() if self._live(*k)}
            self.hooks = {k: seen for k, seen in self.hooks.items() if self._live(*k)}
            await self.checkpoint(checkpoint.EVERY)
            gone = []
            for h, row in list(self.tokens.rows.items()):
                rs = self.state.repo(row.repo) if row.kind == "agent" else None
                rec = rs.sessions.get(row.session) if rs else None
                over = row.expires_ms <= now or row.ended or (row.kind == "agent" and (rec is None or not rec.active(now)))
                if over:
                    gone.append(h)
            if gone:
                for h in gone:
                    self.tokens.rows.pop(h, None)
                await self._delete_tokens(gone)

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
            params = req.get("params", {})
            if not isinstance(params, dict):
                raise LoncaError("invalid", "params is an object ({} when the method has none)")
            if not m.writes and self.log.dirty:
                await self.log.settled()  # a reader answers from durable state only
            who, repo = auth.check(m.credential, m.name, req, self.tokens, self.state, self.now_ms())
            if rate_limited(m, who):
                self.rate.check(self.state.repo(repo), who.session, self.now_ms())
            token = req.get("token")
            result = await m.fn(Call(self, peer, m.name, params, repo, who, token))
            return {"id": rid, "ok": True, "result": result}
        except LoncaError as e:
            security_methods.note(peer, req, e)
            return {"id": rid, "ok": False, "error": e.to_json()}
        except Exception:
            log.exception("method %s failed", req["method"])
            return {"id": rid, "ok": False, "error": {"code": "internal", "message": "the daemon failed on this request; see its log"}}

    async def stop(self) -> None:
        self._sweeper.cancel()
        await self.queue.stop()
        await self.server.close()
        await self.log.settled()
        await self.checkpoint(1)  # the next start replays nothing
        await self.log.stop()
        self.warmer.close()
        self.engine.dispose()


async def serve(config: Config, ready=None) -> None:
    daemon = Daemon(config)
    await daemon.start()
    if ready:
        ready(daemon)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await daemon.stop()
