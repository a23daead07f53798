"""Bridges to the forge (seed 001, human.prepare_import, human.prepare_push): a human brings a
branch of a remote onto trunk, fast-forward only (import.external), and pushes trunk to a remote
(bridge.push), each one signed operation through human.submit. Remotes and the `git` runs are
service/remotes.py's; this module adds its kinds to human.submit's tables when the worker loads it."""
import asyncio
from functools import partial

import pygit2

from lonca.canonical import content_hash
from lonca.protocol import LoncaError

from . import gitstore, remotes
from .backup_methods import LOG_REF, log_commit
from .change_build import facts_of
from .change_methods import leases_on, facts_json
from .human_methods import SUBMIT_AROUND, SUBMIT_OPS, Append, check_prepared
from .log import Draft, allow, deny
from .methods import Call, method
from .read_methods import on_store
from .reducers import changed_symbols
from .state import RepoState
from .store import PreparedRow

# trunk's name in the store (gitstore.TRUNK_REF) and on the remote: a push goes to it, and an
# import that names no branch comes from it (seed 001: import_from fetches "branch (default main)")
PUSH_BRANCH = "main"
POLICY_REF = "refs/lonca/policy"


def _fast_forward(store: pygit2.Repository, trunk: str, commit: str) -> None:
    """up_to_date when trunk has `commit` already, not_fast_forward when `commit` does not
    contain trunk."""
    if commit == trunk or store.descendant_of(trunk, commit):
        raise LoncaError("up_to_date", f"trunk ({trunk[:12]}) already has {commit[:12]}: nothing to import")
    if not store.descendant_of(commit, trunk):
        raise LoncaError("not_fast_forward", f"{commit[:12]} does not contain trunk ({trunk[:12]}): merge trunk "
                                             "into the branch (or rebase it on trunk) upstream, then import again")


@method("human.prepare_import", "human")
async def prepare_import(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    remote, branch = call.params["remote"], call.params.get("branch") or PUSH_BRANCH
    from_copy = remotes.check_remote(d.config, remote)
    trunk = rs.trunk  # read on the loop: the threads read no live state
    try:
        commit = await asyncio.to_thread(remotes.fetch, d.config.store_path(rs.name), remote, branch, from_copy)
    except LoncaError as e:
        if e.code != "git" or call.params.get("branch"):
            raise
        raise LoncaError("git", f"{e.message} (no branch was named, so {PUSH_BRANCH}, where a push goes: name the "
                                "branch to import, `lonca import --branch B`)") from None
    await on_store(call, _fast_forward, trunk, commit)
    op = {"op": "import.external", "remote": remote, "commit": commit, "trunk_before": trunk}
    await d.db_write([PreparedRow(op_hash=content_hash(op), kind="import.external", created_ms=d.now_ms())])
    return {"op": op}


async def submit_import(call: Call, rs: RepoState, op: dict, append: Append) -> dict:
    """The facts of trunk_before -> commit (off the loop), then the decision."""
    await check_prepared(call, op, "human.prepare_import")
    d, redacted = call.ctx, frozenset(rs.redacted)     # read on the loop

    def facts(store: pygit2.Repository) -> dict:
        _fast_forward(store, op["trunk_before"], op["commit"])
        base_map = d.tree_maps.get(store, op["trunk_before"])
        return facts_json(facts_of(store, d.symbols, op["trunk_before"], base_map, d.tree_maps.get(store, op["commit"]),
                                   redacted=redacted))
    return await append(partial(decide_import, facts=await on_store(call, facts)))


def decide_import(call: Call, rs: RepoState, op: dict, *, facts: dict) -> Draft:
    """Trunk moves to the imported commit once the entry is durable; each lease another session
    holds on a symbol it changed (or that reads one) gets a symbols_changed event."""
    d = call.ctx
    if rs.trunk != op["trunk_before"]:
        raise LoncaError("not_fast_forward", f"trunk moved to {rs.trunk[:12]} since human.prepare_import; "
                                             "prepare the import again")
    if rs.frozen is not None:
        return Draft(actor=call.auth.actor, op=op, decision=deny(f"frozen:{rs.frozen}"), facts=facts)
    sets = leases_on(rs, changed_symbols(facts) + facts.get("affected", []), None, d.now_ms())
    info = [f"affected_lease:{rs.sets[sid].session}:{sid}" for sid in sorted(sets)]

    def move() -> None:
        try:
            gitstore.move_trunk(d.store(rs.name), d.config.store_path(rs.name), op["commit"])
        except pygit2.GitError:
            pass  # the merge queue sets trunk's ref to the log's on its next wake (QueueRunner._check_trunk_ref)
        d.warmer.ask(rs.name, op["commit"])
        d.queue_wake()
    return Draft(actor=call.auth.actor, op=op, decision=allow(*info), facts=facts,
                 result=lambda e: {"trunk": op["commit"]}, after_commit=[move])


async def _refuse_redacted(call: Call, rs: RepoState, remote: str) -> None:
    """`redacted` when the push would hand the remote a redacted blob it does not hold (trunk and
    the policy commit are what it pushes that holds files; the log ref holds entries)."""
    heads, redacted = [rs.trunk, rs.policy_id], frozenset(rs.redacted)  # read on the loop
    found = await asyncio.to_thread(remotes.redacted_to_send, call.ctx.config.store_path(rs.name), remote, heads, redacted)
    if found is not None:
        raise LoncaError("redacted", f"a redacted blob ({found}) is among the objects {remote} lacks, and a push hands "
                                     "git's objects whole: rewrite that history outside Lonca (and rotate the secret), "
                                     "or push to a remote that holds it already")


@method("human.prepare_push", "human")
async def prepare_push(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    remote = call.params["remote"]
    remotes.check_remote(d.config, remote, push=True)
    await _refuse_redacted(call, rs, remote)
    op = {"op": "bridge.push", "remote": remote, "oplog_seq": rs.next_seq - 1, "oplog_hash": rs.head_hash}
    await d.db_write([PreparedRow(op_hash=content_hash(op), kind="bridge.push", created_ms=d.now_ms())])
    return {"op": op}


def decide_push(call: Call, rs: RepoState, op: dict) -> Draft:
    """The push itself runs after the entry is durable (submit_push): what it pushes is trunk
    as of this entry, which the log's replay gives, with the log up to this entry under
    refs/lonca/log and the policy commit under refs/lonca/policy (what repo.restore reads)."""
    remotes.check_remote(call.ctx.config, op["remote"], push=True)
    trunk = rs.trunk
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"trunk": trunk})


async def submit_push(call: Call, rs: RepoState, op: dict, append: Append) -> dict:
    await check_prepared(call, op, "human.prepare_push")
    await _refuse_redacted(call, rs, op["remote"])  # trunk may have moved since the prepare: nothing logged yet
    res = await append()
    if res["decision"]["outcome"] != "allow":
        return res
    d, name, seq, policy = call.ctx, rs.name, res["seq"], rs.policy_id

    def work(store: pygit2.Repository) -> str:
        """Trunk, the log up to this entry (a restore's source) and the policy commit, which
        lives off trunk and reaches every earlier one."""
        log_commit(store, d.engine, name, seq, d.now_ms())
        refs = {f"refs/heads/{PUSH_BRANCH}": res["trunk"], LOG_REF: str(store.references[LOG_REF].target),
                POLICY_REF: policy}
        return remotes.push(d.config.store_path(name), op["remote"], refs)
    try:
        out = await on_store(call, work)
    except LoncaError as e:
        raise LoncaError("git", f"{e.message} (the bridge.push entry, seq {res['seq']}, stands: once the remote "
                                "takes trunk, push again with a new human.prepare_push)") from None
    return {**res, "push": out}


SUBMIT_OPS.update({"import.external": decide_import, "bridge.push": decide_push})
SUBMIT_AROUND.update({"import.external": submit_import, "bridge.push": submit_push})
