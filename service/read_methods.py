"""Methods that read: ping, whoami, repo.list, status, log, tree, blobs. None of them logs."""
import asyncio
import json
from typing import Callable, TypeVar

import pygit2

import lonca
from lonca.protocol import PROTOCOL, STATUS_LISTS, LoncaError, actor_label

from . import gitstore, presence
from .cedar_policy import problem as cedar_problem
from .methods import Call, method
from .state import ChangeRec, RepoState
from .store import read_log_text
from .wire_json import Raw, utf8

T = TypeVar("T")



@method("ping", "public")
async def ping(call: Call) -> dict:
    d = call.ctx
    return {"version": lonca.__version__, "protocol": PROTOCOL, "daemon_key": d.keys.public, "next_key": d.keys.next_public,
            "proxy": None, "hardened": d.config.hardened, "refused": {**d.refused, "rate_limited": d.rate.refused},
            "bootstrap": not d.state.repos}  # a tokenless repo.prepare_init is open (seed: bootstrap)


@method("whoami", "any")
async def whoami(call: Call) -> dict:
    d, a = call.ctx, call.auth
    if a.kind == "agent":
        rec = d.state.repo(a.repo).sessions.get(a.session)
        return {"repo": a.repo, "actor": actor_label(a.actor),
                "session": rec.to_json(d.now_ms()) if rec else None}
    return {"actor": actor_label(a.actor), "human": a.human, "key": a.key["public"],
            "repos": d.state.human_repos(a.human, a.key)}


@method("repo.list", "any human")
async def repo_list(call: Call) -> list:
    """Not the foreign ones (seed: waiting for daemon.recover), which whoami lists."""
    d = call.ctx
    return [r for r in d.state.human_repos(call.auth.human, call.auth.key) if d.keys.holds(d.state.repos[r].daemon_key)]


@method("status", "read")
async def status(call: Call) -> dict:
    d = call.ctx
    rs = call.repo_state()
    now = d.now_ms()
    pol = rs.policy
    wanted = call.params.get("lists")
    lists = STATUS_LISTS if wanted is None else wanted
    out = {
        "repo": rs.name, "trunk": rs.trunk, "policy": rs.policy_id, "policy_checks": pol.check_names,
        "policy_problem": pol.problem or cedar_problem(pol.cedar),
        "frozen": rs.frozen, "queue": list(rs.queue), "next_seq": rs.next_seq, "head_hash": rs.head_hash,
        "now_ms": now, "verification_day_ms": rs.verification_days.get(now // 86_400_000, 0), "daemon_key": rs.daemon_key,
        # not in the seed: the log is on a key this daemon does not hold, waiting for daemon.recover
        "foreign": not d.keys.holds(rs.daemon_key),
        "flaky": dict(sorted(rs.flaky.items())),
        "below_hardened": presence.below_hardened(rs) if d.config.hardened else [], "profile": rs.profile, "unparsed_files": pol.unparsed_files,
        "humans": {n: {"alg": k["alg"], "public": k["public"], "recovery": rs.recovery[n]["public"] if n in rs.recovery else None,
                       "counts_as": rs.principal(n)} for n, k in sorted(rs.humans.items())},
        # human writes need a key that proves presence ([review] presence_required, or hardened)
        "presence_required": pol.presence_required or rs.profile == "hardened",
        # the users agents' requests came from since the worker started (lonca doctor compares its own)
        "agent_uids": sorted(d.agent_uids.get(rs.name, ())),
    }
    if "sessions" in lists:
        out["sessions"] = d.status_parts.sessions(rs, now)
    if "leases" in lists:
        out["leases"] = [s.to_json(live) for s in rs.sets.values()
                         for live in (rs.set_live(s, now),) if (live and s.items) or s.pinned]
    if "changes" in lists:
        out["changes"] = d.status_parts.changes(rs, now)
    if "pending" in lists:
        out["pending"] = d.status_parts.pending(rs, now)
    if "interests" in lists:
        out["interests"] = [i.to_json() for i in rs.interests]
    if "reservations" in lists:
        out["reservations"] = [r.to_json() for r in rs.reservations if r.until_ms > now]
    return out


@method("log", "read")
async def log(call: Call) -> list:
    p = call.params
    d = call.ctx
    rs = call.repo_state()
    start, limit, wait = p["from"], p.get("limit"), p.get("wait_ms")
    lim = d.config.limits
    limit = min(limit or lim.log_limit_max, lim.log_limit_max)
    if wait and d.log.durable_next.get(rs.name, 1) <= start:
        await d.log.wait_for(rs.name, start, min(wait, lim.log_wait_max_ms) / 1000)
    return await asyncio.to_thread(log_answer, d.engine, rs.name, start, limit)


def log_answer(engine, repo: str, start: int, limit: int) -> Raw:
    """`log`'s list, encoded on the thread from the rows as stored: each entry is its canonical
    text, which is JSON already. Decoding each entry on the loop and encoding it again was a
    tenth of the loop's time while a follower read 1 000 agents' heartbeats (bench fleet)."""
    rows = read_log_text(engine, repo, start, limit)
    return Raw(b"[" + b",".join(b'{"entry":%s,"hash":%s,"sig":%s}' % (utf8(e), json.dumps(h).encode(), json.dumps(s).encode())
                               for e, h, s in rows) + b"]")


async def on_store(call: Call, fn: Callable[..., T], *args) -> T:
    """`fn(store, *args)` on a worker thread, with that thread's own handle on the repository's
    store: a pygit2 handle is never shared between threads (docs/decisions.md, "The merge queue
    in the worker"), so none is taken on the event loop and handed over."""
    d, repo = call.ctx, call.repo_state().name
    return await asyncio.to_thread(lambda: fn(d.store(repo), *args))


def on_loop_store(call: Call, fn: Callable[..., T], *args) -> T:
    """`fn(store, *args)` here on the event loop, with the loop thread's own handle (never handed
    to a thread): for work so small that a thread's hand-off and the GIL's would cost more."""
    return fn(call.ctx.store(call.repo_state().name), *args)


async def find_change(rs: RepoState, change: str) -> ChangeRec | None:
    """A change in flight, or as it settled (service/settled.py): its table read on a thread, and
    what it answers kept for the decision and the reducer that follow (SettledChanges.recall), so
    they need not read it on the event loop. It reads the state after an await: a read that
    answers from what it returns waits after its last read (LogWriter.settled with `since`)."""
    rec = rs.changes.get(change) or rs.settled.held(change)
    reader = rs.settled.reader
    if rec is None and reader is not None:
        rec = await asyncio.to_thread(reader.get, rs.name, change, None)
        if rec is not None:
            rs.settled.recall(rec)
            rec = rs.change(change)     # a version proposed while the table was read is the one
    return rec


async def integrated_changes(rs: RepoState, sessions: set[str]) -> list[ChangeRec]:
    """The integrated changes of these sessions: those settled lately, and the table's (on a thread)."""
    found = {rec.id: rec for rec in rs.settled.held_integrated(sessions)}
    reader = rs.settled.reader
    if reader is not None:
        for rec in await asyncio.to_thread(reader.integrated, rs.name, sessions):
            found.setdefault(rec.id, rec)
    return list(found.values())


@method("tree", "read")
async def tree(call: Call) -> list | Raw:
    p = call.params
    call.repo_state()  # an unknown repository is not_found before anything else
    commit, with_content, wanted = p["commit"], p.get("with_content", False), p.get("paths")
    maps, manifests = call.ctx.tree_maps, call.ctx.manifests
    if wanted is None and not with_content:     # the manifest: rendered once a commit (tree_manifest)
        def whole(store: pygit2.Repository) -> Raw:
            gitstore.commit_of(store, commit)
            return manifests.whole(store, commit)
        return await on_store(call, whole)

    def entries(store: pygit2.Repository) -> list[dict]:
        """From the worker's map of the commit's tree (made from its parent's when that is
        held): the cost is that of the paths answered."""
        gitstore.commit_of(store, commit)
        files = maps.get(store, commit)
        paths = sorted(files) if wanted is None else sorted(p for p in set(wanted) if p in files)
        return [maps.entry(store, x, files[x]) for x in paths]
    files = await on_store(call, entries)
    if with_content:
        redacted = frozenset(call.repo_state().redacted)
        if sum(gitstore.b64_size(f["size"]) for f in files if f["blob"] not in redacted) > call.ctx.config.limits.page_b64:
            raise LoncaError("too_large", "the tree's contents do not fit one line; fetch the manifest and page with blobs")
        return await on_store(call, gitstore.with_contents, files, redacted)
    for f in files:
        f["content_b64"] = None
    return files


@method("blobs", "read")
async def blobs(call: Call) -> list:
    p = call.params
    call.repo_state()  # an unknown repository is not_found before anything else
    commit, wanted = p["commit"], p["paths"]
    d = call.ctx

    def entries(store: pygit2.Repository) -> list[dict]:
        """Only the paths asked for, from the worker's cached map of the commit's tree."""
        gitstore.commit_of(store, commit)
        files = d.tree_maps.get(store, commit)
        missing = [x for x in wanted if x not in files]
        if missing:
            raise LoncaError("not_found", f"{missing[0]} is not in commit {commit}")
        return [gitstore.file_entry(store, x, files[x].oid, int(files[x].mode, 8)) for x in dict.fromkeys(wanted)]
    page = await on_store(call, entries)
    budget, redacted = call.ctx.config.limits.page_b64, frozenset(call.repo_state().redacted)
    total = 0
    for f in page:
        if f["blob"] in redacted:   # served as null: it takes no room (a workspace asks for a big one alone)
            continue
        total += gitstore.b64_size(f["size"])
        if total > budget:
            raise LoncaError("too_large", f"{f['path']} does not fit this page; ask for fewer files per page")
    return await on_store(call, gitstore.with_contents, page, redacted)
