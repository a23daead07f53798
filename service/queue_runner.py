"""The worker's merge queue: drains each repository's queue in the background (woken by a
proposal or an approval, and every two seconds anyway), integrates with `lonca.queue`, runs the
checks the policy owes, and logs `change.integrate` / `change.integrate_batch`. Trunk's ref moves
only after the entry is durable; at start it is repaired from the log (see Daemon._check_store),
and on every wake when a move failed (a stale `main.lock`, see gitstore); a ref moved outside
Lonca is logged as import.unmediated on the next wake and set back (_check_trunk_ref). An integration is not
logged while a live process holds trunk's lock: it would be acknowledged with a ref that cannot move.

At a shutdown the running checks' groups are killed (`kill_running`) so the worker stops in
seconds, not after the check's time limit."""
import asyncio
import logging
import shutil
import threading
from dataclasses import dataclass

import pygit2

from lonca.protocol import LoncaError
from lonca.queue import (CheckSpec, Footprint, QueuedChange, Screening, Verdict, ahead, attestations, clear_of, footprint,
                         reasons, run_lanes, run_screened, verify_tree)
from lonca.queue.checkout import KeptCheckout, slot_folder, sweep_slots
from lonca.queue.checks import kill_running
from lonca.queue.slots import Slots

from . import gitstore
from .gitstore import DAEMON_SIG
from .log import DAEMON, Draft, allow, deny
from .policy import Policy
from .running_checks import Round
from .state import RepoState
from .supervision import supervise

log = logging.getLogger("lonca.queue")
MAX_OUTPUT = 1024 * 1024  # byte cap on each of a check's stdout and stderr


@dataclass(frozen=True)
class _Snapshot:
    """What a batch's checks need of the live state, read on the loop when the batch starts: the
    thread that merges and verifies never reads a RepoState the loop goes on changing."""
    policy: Policy
    quota: dict[str, list[str]]   # change -> its [quota] reasons
    runs: dict[str, list[str]]    # change -> the checks the policy owes for it


class QueueRunner:
    def __init__(self, daemon):
        self.d = daemon
        self.wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._unmediated: set[tuple[str, str]] = set()  # (repo, commit) logged as import.unmediated
        self._slots: dict[str, Slots] = {}      # repo -> its runner slots, shared by its rounds in flight
        self._rounds = 0                        # rounds started: the older round's checks go first
        self._kept: dict[tuple[str, int], KeptCheckout] = {}   # (repo, slot) -> its checkout
        # screened rounds: what the last waves said of queued changes (by change and commit, a
        # prediction only), and the checks' observed failure rate, (rejected + 1) / (decided + 10)
        self._screen: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        self._outcomes: dict[str, list[int]] = {}  # repo -> [rejected by checks, decided]

    def start(self, on_fatal) -> None:
        self._task = supervise("merge queue", self._run(), on_fatal)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        if kill_running():
            log.info("the running checks were killed: the worker is stopping")
        for kept in self._kept.values():
            shutil.rmtree(kept.root.parent, ignore_errors=True)

    async def _run(self) -> None:
        # kept checkouts left by a worker killed before its stop: removed on a thread, as a
        # large repository's checkouts take seconds to delete and the loop is answering already
        for gone in await asyncio.to_thread(sweep_slots):
            log.info("removed %s, a kept checkout of a worker that no longer runs", gone)
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            for rs in list(self.d.state.repos.values()):
                if not self.d.keys.holds(rs.daemon_key):
                    continue    # foreign: nothing can be logged there until a daemon.recover
                try:
                    await self._check_trunk_ref(rs)
                    if rs.queue and not rs.frozen:
                        await self._drain(rs)
                    if rs.policy.checks_before_decision and not rs.frozen:
                        await self._check_pending(rs)
                except LoncaError as e:  # the log is not writable now (the database is away)
                    log.warning("the queue of %s waits: %s", rs.name, e.message)
                    await asyncio.sleep(1)
                except Exception:
                    log.exception("the queue of %s failed; it is tried again on the next wake", rs.name)
                    await asyncio.sleep(1)

    def _trunk_unlocked(self, rs: RepoState) -> None:
        """`git` while a live process holds trunk's lock: the drain stops there and the queue waits
        (a second between tries), instead of running the checks again and again meanwhile."""
        if not gitstore.clear_stale_trunk_lock(self.d.config.store_path(rs.name)):
            raise LoncaError("git", f"trunk's ref of {rs.name} is locked by a running process; the integration waits for it")

    async def _drain(self, rs: RepoState) -> None:
        """Rounds of up to batch_size changes until the queue is empty or frozen: merged, verified
        (bisected on a failure; in independent lanes at once under [queue] runners > 1), then
        logged; trunk's ref moves after the entry is durable.

        Pipelined under `speculate` with runners > 1: once a round has announced the tree it
        lands if that tree's checks pass, the next round starts on that tree (with the changes
        that depend on nothing the first may still reject or requeue) while the first one's
        checks and culprit search go on. The next round is logged only if trunk is then exactly
        the tree it was built on; otherwise it is thrown away unlogged, its changes still queued.
        Either way a tree lands only on passing checks of exactly that tree.

        Under `[queue] rounds = "screened"` (the default) rounds are one wave each, one at a time
        (run_screened): what a wave said of the changes it left queued is kept here by change
        and commit (`_screen`), a prediction that places them in the next wave, never a verdict."""
        head = self._start(rs, rs.trunk, None)
        nxt: _InFlight | None = None
        try:
            while head is not None:
                if head.pipelined:
                    await asyncio.wait([head.task, head.announced], return_when=asyncio.FIRST_COMPLETED)
                    if head.announced.done() and not head.task.done() and not rs.frozen:
                        nxt = self._start(rs, head.announced.result(), head)
                await self._settle(rs, await head.task)
                if nxt is not None and rs.trunk != nxt.base:
                    await nxt.discard()
                    nxt = None
                head, nxt = nxt, None
                if head is None and rs.queue and not rs.frozen:
                    head = self._start(rs, rs.trunk, None)
        finally:
            for r in (head, nxt):       # an error (the log away): no round goes on unlogged
                if r is not None and not r.task.done():
                    await r.discard()

    def _start(self, rs: RepoState, base: str, ahead: "_InFlight | None") -> "_InFlight | None":
        """A round on `base` (trunk, or the tree the round `ahead` announced), in a thread of its
        own; None when no queued change may go in it. Beside a round in flight it takes only
        changes that depend on none of that round's changes outside the announced tree."""
        order = [cid for cid in self._ordered(rs) if cid not in self.d.verifying]
        if ahead is not None:
            held = [p for cid, p in zip(ahead.window, ahead.prints) if cid not in ahead.landing]
            order = [order[i] for i in clear_of([self._print(rs, cid) for cid in order], held)]
        screened = rs.policy.speculate and rs.policy.runners > 1 and rs.policy.rounds == "screened"
        # a screened round picks its wave from more of the queue: the cleared, the suspects, and
        # groups of fresh changes for every runner left
        window = order[: max(1, rs.policy.batch_size) * (4 if screened else 1)]
        if not window:
            return None
        batch = [self._queued(rs, cid) for cid in window]
        prints = [self._print(rs, cid) for cid in window]
        now, pol, repo, symbols = self.d.now_ms(), rs.policy, rs.name, self.d.symbols
        snap = _Snapshot(pol, {q.change: rs.quota_reasons(rs.changes[q.change].session, now) for q in batch},
                         {q.change: pol.runs(rs.changes[q.change]) or [] for q in batch})
        committer = pygit2.Signature(*DAEMON_SIG, now // 1000, 0)
        slots = self._slots.get(repo)
        if slots is None or (slots.size != max(1, pol.runners) and slots.idle):
            slots = self._slots[repo] = Slots(pol.runners)
        self._rounds += 1
        loop = asyncio.get_running_loop()
        r = _InFlight(base, window, prints, pol.speculate and pol.runners > 1 and not screened, loop.create_future())
        watched = self.d.running.begin(repo, "integrate", window)
        order_no = self._rounds

        def verify(prefix: list[QueuedChange], commit: str) -> Verdict:
            if r.cancelled.is_set():
                return Verdict(ok=False, reasons=["cancelled"], detail=[])
            with slots.take(order_no) as slot:
                if r.cancelled.is_set():
                    return Verdict(ok=False, reasons=["cancelled"], detail=[])
                # the lanes' checks run on threads of their own: each takes its thread's handle
                kept = None if pol.runner == "celery" else self._checkout(repo, slot)    # a runner unpacks its own
                return self._verify(self.d.store(repo), snap, prefix, commit, watched, kept)

        def announce(chain: list[tuple[QueuedChange, str]]) -> None:
            r.landing = {q.change for q, _ in chain}
            loop.call_soon_threadsafe(lambda: r.announced.done() or r.announced.set_result(chain[-1][1]))

        # beside a round in flight, half the runners: the other half is that round's second wave
        groups = max(2, pol.runners // 2 - 1) if ahead is not None else None

        redacted, maps = frozenset(rs.redacted), self.d.tree_maps
        cleared, suspect = self._screen.get(repo, ({}, {}))
        commits = {q.change: q.commit for q in batch}
        known = Screening({c for c, k in cleared.items() if commits.get(c) == k},
                          {c for c, k in suspect.items() if commits.get(c) == k})
        failed, decided = self._outcomes.setdefault(repo, [0, 0])
        rate = (failed + 1) / (decided + 10)

        def work():
            if ahead is None:   # a round beside one in flight meets the lock when it lands
                self._trunk_unlocked(rs)    # a stat: here, not on the loop, which would wait for the GIL after it
            store = self.d.store(repo)
            screening = None
            if screened:
                out, screening = run_screened(store, base, batch, prints, verify, pol.runners, pol.batch_size, rate,
                                              known, committer, symbols)
            else:
                out = run_lanes(store, base, batch, prints, verify, pol.runners, committer, symbols,
                                speculate=pol.speculate, announce=announce if r.pipelined else None, groups=groups)
            if out.landed:  # the next trunk's map, made here: the previews its move wakes find it held, so
                maps.get(store, out.landed[-1][1])  # the first of them does not make it on the loop (TreeMaps.near)
            # a conflict's names are read from the base's side too: none of a redacted blob's is logged
            files = maps.get(store, base) if redacted and out.conflicted else {}
            paths = {c.split("#", 1)[0] for _q, i in out.conflicted for c in i.conflicts}
            return out, {p for p in paths if (e := files.get(p)) is not None and e.oid in redacted}, screening

        async def run():
            try:
                out, hidden, screening = await asyncio.to_thread(work)
                if screening is not None:   # the queue's own state, written on the loop, not by the round's thread
                    self._screen[repo] = ({c: commits[c] for c in screening.cleared},
                                          {c: commits[c] for c in screening.suspect})
                    tally = self._outcomes[repo]
                    tally[0] += len(out.rejected)
                    tally[1] += len(out.rejected) + len(out.landed)
                return out, hidden
            finally:
                self.d.verifying.difference_update(window)
                self.d.running.end(repo, watched)
        self.d.verifying.update(window)
        r.task = asyncio.ensure_future(run())
        return r

    async def _settle(self, rs: RepoState, outcome) -> None:
        """A round's outcome logged: conflicts and culprits denied, what passed landed; a conflict
        in a redacted file is named by the file alone."""
        out, hidden = outcome
        for q, integration in out.conflicted:
            conflicts = list(dict.fromkeys(f"{c.split('#', 1)[0]}#<file>" if c.split("#", 1)[0] in hidden else c
                                           for c in integration.conflicts))
            await self._log_one(rs, q.change, conflicts, [], [f"conflict:{c}" for c in conflicts] or ["merge_conflict"])
        if out.landed:
            verdict = out.landed_verdict
            await self._land(rs, out.trunk_before, out.landed, verdict.detail if verdict else [])
        for q, verdict in out.rejected:
            await self._log_one(rs, q.change, [], verdict.detail, verdict.reasons)

    @staticmethod
    def _print(rs: RepoState, cid: str) -> Footprint:
        return footprint(rs.changes[cid].paths, rs.changes[cid].facts)

    async def _check_pending(self, rs: RepoState) -> None:
        """[review] checks_before_decision: the oldest pending change whose version has not been
        checked gets the checks it owes, on its own commit (not merged with trunk: the queue
        verifies the candidate again), as a CI status on a pull request; logged as change.check.
        One change a wake, so the queue's own work is never long behind."""
        todo = [rec for rec in (rs.changes.get(p.change or "") for p in sorted(rs.pending.values(), key=lambda p: p.seq))
                if rec is not None and rec.review_commit != rec.commit and rs.policy.runs(rec)]
        if not todo:
            return
        rec = todo[0]
        now, repo, commit = self.d.now_ms(), rs.name, rec.commit
        snap = _Snapshot(rs.policy, {rec.id: rs.quota_reasons(rec.session, now)}, {rec.id: rs.policy.runs(rec) or []})
        prefix = [self._queued(rs, rec.id)]
        watched = self.d.running.begin(repo, "review", [rec.id])
        try:
            verdict = await asyncio.to_thread(lambda: self._verify(self.d.store(repo), snap, prefix, commit, watched))
        finally:
            self.d.running.end(repo, watched)

        def decide() -> Draft:
            if rs.changes[rec.id].commit != commit or rs.changes[rec.id].status["status"] != "pending":
                raise _Moved()  # another version came, or a human decided meanwhile: it is not logged
            return Draft(actor=DAEMON, op={"op": "change.check", "change": rec.id, "commit": commit},
                         decision=allow() if verdict.ok else deny(*verdict.reasons), evidence=verdict.detail)
        try:
            await self.d.log.append(repo, decide)
        except _Moved:
            pass

    @staticmethod
    def _ordered(rs: RepoState) -> list[str]:
        """The queue, with the changes a human gave priority ahead of those they do not
        depend on (lonca.queue.ahead)."""
        urgent = {i for i, cid in enumerate(rs.queue) if rs.changes[cid].priority_seq is not None}
        if not urgent:
            return list(rs.queue)
        prints = [QueueRunner._print(rs, cid) for cid in rs.queue]
        return [rs.queue[i] for i in ahead(prints, urgent)]

    def _queued(self, rs: RepoState, cid: str) -> QueuedChange:
        rec = rs.changes[cid]
        now = self.d.now_ms()
        author = pygit2.Signature((rec.actor.get("name") or "lonca")[:200], DAEMON_SIG[1], now // 1000, 0)
        return QueuedChange(cid, rec.commit, rec.base, f"{rec.intent or 'Lonca change'}\n\nLonca-Change: {cid}\n", author)

    def _checkout(self, repo: str, slot: int) -> KeptCheckout:
        """The checkout a runner slot keeps between checks (a check holds its slot while it runs)."""
        kept = self._kept.get((repo, slot))
        if kept is None:
            kept = self._kept[(repo, slot)] = KeptCheckout(slot_folder() / "tree")
        return kept

    @staticmethod
    def _verify(store: pygit2.Repository, snap: _Snapshot, prefix: list[QueuedChange], commit: str, watched: Round,
                kept: KeptCheckout | None = None) -> Verdict:
        """The checks the prefix owes under the policy in force when the batch started, on the
        candidate's tree, followed live in `watched` (queue.running). Runs on the batch's
        thread: reads `snap`, never the live state."""
        over = sorted({r for q in prefix for r in snap.quota[q.change]})
        if over:
            return Verdict(ok=False, reasons=over, detail=[])  # past [quota]: the checks do not run
        owed: list[str] = []
        for q in prefix:
            for name in snap.runs[q.change]:
                if name not in owed:
                    owed.append(name)
        pol = snap.policy
        specs = [CheckSpec(name, tuple(pol.argv(name)), pol.check_timeout_s, pol.check_env, MAX_OUTPUT,
                           attempts=1 + pol.retries)
                 for name in owed if pol.argv(name)]
        tree = str(store[commit].peel(pygit2.Commit).tree_id)
        runner = None
        remote = pol.runner == "celery"
        candidate = watched.candidate([q.change for q in prefix], commit, remote)
        if remote:      # imported here: Celery is an optional dependency; a runner's output comes at its end
            from lonca.queue.celery_runner import verify_remote
            results, runner = verify_remote(store, tree, specs)
        else:
            results = verify_tree(store, tree, specs, watch=candidate, kept=kept)
        why = reasons(results, owed)
        candidate.finish(not why)
        return Verdict(ok=not why, reasons=why, detail=[a for r in results for a in attestations(store, r, tree, runner)])

    async def _land(self, rs: RepoState, trunk_before: str, landed: list[tuple[QueuedChange, str]], attestations: list[dict]) -> None:
        self._trunk_unlocked(rs)

        def decide() -> Draft:
            if rs.trunk != trunk_before or any(rs.changes[q.change].status["status"] != "queued" for q, _ in landed):
                raise _Moved()
            if len(landed) == 1:
                op = {"op": "change.integrate", "change": landed[0][0].change, "trunk_before": trunk_before,
                      "merged": landed[0][1], "conflicts": []}
            else:
                op = {"op": "change.integrate_batch", "trunk_before": trunk_before,
                      "merged": [[q.change, commit] for q, commit in landed]}
            return Draft(actor=DAEMON, op=op, decision=allow(), evidence=attestations)
        try:
            await self.d.log.append(rs.name, decide)
        except _Moved:
            return
        self.move_trunk(rs.name, landed[-1][1])

    async def _log_one(self, rs: RepoState, cid: str, conflicts: list[str], attestations: list[dict], why: list[str]) -> None:
        def decide() -> Draft:
            if rs.changes[cid].status["status"] != "queued":
                raise _Moved()
            op = {"op": "change.integrate", "change": cid, "trunk_before": rs.trunk, "merged": None, "conflicts": conflicts}
            return Draft(actor=DAEMON, op=op, decision=deny(*why), evidence=attestations)
        try:
            await self.d.log.append(rs.name, decide)
        except _Moved:
            pass

    def move_trunk(self, repo: str, commit: str) -> None:
        """After the entry is durable; a failure is logged and repaired on the next wake."""
        try:
            gitstore.move_trunk(self.d.store(repo), self.d.config.store_path(repo), commit)
        except pygit2.GitError as e:
            log.error("%s: trunk's ref could not move to %s (%s); tried again on the next wake", repo, commit, e)
            return
        self.d.warmer.ask(repo, commit)
        self.d.packer.nudge(repo)

    async def _check_trunk_ref(self, rs: RepoState) -> None:
        """Trunk's ref names what the log last integrated (durably: never during a commit). A ref
        at a commit that was trunk before (a crash between an entry and its ref, a failed move)
        is set to the log's. A ref at a commit that never was trunk was moved outside Lonca: that
        is logged (import.unmediated, refused `not_adopted`), the commit kept under
        refs/lonca/unmediated/ for a human to look at, and the ref set back: never adopted."""
        if self.d.log.dirty:
            return
        store = self.d.store(rs.name)
        found = gitstore.trunk(store)
        if found == rs.trunk:
            return
        if await rs.trunks.find(found) is not None:
            log.warning("%s: trunk's ref was behind the log; moved to %s", rs.name, rs.trunk)
        elif (rs.name, found) not in self._unmediated:
            expected = rs.trunk

            def decide() -> Draft:
                op = {"op": "import.unmediated", "refname": gitstore.TRUNK_REF, "found": found, "expected": expected}
                return Draft(actor=DAEMON, op=op, decision=deny("not_adopted"))
            await self.d.log.append(rs.name, decide)
            self._unmediated.add((rs.name, found))
            try:
                store.references.create(f"{gitstore.UNMEDIATED_REFS}{found}", pygit2.Oid(hex=found), force=True)
            except (pygit2.GitError, ValueError) as e:  # not a commit of this store: nothing to keep
                log.warning("%s: trunk's ref named %s, which can not be kept (%s)", rs.name, found, e)
            log.error("%s: trunk's ref was moved outside Lonca to %s; logged as import.unmediated and set back to %s "
                      "(import it with human.prepare_import to adopt it)", rs.name, found, expected)
        self.move_trunk(rs.name, rs.trunk)


class _InFlight:
    """A round running on its thread: the trunk it is built on (`base`), its window, and once
    it announced the tree it lands on passing checks, that tree's commit (`announced`)."""

    def __init__(self, base: str, window: list[str], prints: list[Footprint], pipelined: bool,
                 announced: asyncio.Future) -> None:
        self.base, self.window, self.prints, self.pipelined = base, window, prints, pipelined
        self.announced = announced
        self.landing: set[str] = set()      # the changes of the announced tree
        self.cancelled = threading.Event()
        self.task: asyncio.Future

    async def discard(self) -> None:
        """Built on a tree that did not land (or the drain failed): its checks not yet started
        never start, and its outcome is not logged; its changes stay queued."""
        self.cancelled.set()
        try:
            await self.task
        except Exception:
            log.exception("a discarded round failed")


class _Moved(Exception):
    """Trunk or the change moved while the candidate was built: build it again."""
