"""The observation layer (seed 001: hook.event, hook.bind, hook.stop, mcp.call, harness.setup):
what a harness's hooks tell the worker, and what the worker answers them.

A write tool's call (Claude Code's Edit, Write, MultiEdit, NotebookEdit; Gemini CLI's replace and
write_file; Codex's apply_patch, a patch of several files, also run as a shell heredoc) is judged
before it runs from its own effect: the worker applies the tool's input to the files as the
workspace holds them (sent with the event), computes the facts of that one step with the symbols
engine, and denies it when the session lacks a lease those facts need or the scope does not reach
them. Other shell commands can not be judged that way: they run, and a path a proposal touches
that no judged write tool wrote escalates as unobserved_write:<path> (change_methods).

Params are checked at the edge against service/schemas.py; a harness's tool input is read here
key by key."""
import os
import shlex
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import pygit2

from lonca import apply_patch
from lonca.harness import PATCH_TOOLS, patch_of, stop_output as stop_shape, written_paths
from lonca.protocol import LoncaError
from lonca.symbols import TreeEntry, compute_facts

from . import scope as scopes
from . import security_methods
from .change_build import TreeOverlay, check_files, commit_exists, facts_json
from .change_methods import lease_standing, needed
from .lease_methods import advice
from .lease_model import FILE
from .log import Draft, allow
from .methods import Call, method
from .paths import check_path
from .policy import LEVELS
from .read_methods import integrated_changes, on_store
from .state import RepoState, SessionRec

EVENT_WAIT_MS = 600_000  # a before-tool event of an MCP tool waits this long for its mcp.call
START_GRACE_MS = 10_000  # after a restart an event may have gone to the daemon before


@dataclass
class HookSeen:
    """What a live session's hooks did since the daemon started (memory only)."""
    last_hook_ms: int | None = None
    mcp_events: deque = field(default_factory=deque)  # (tool, time_ms) of before-tool events of lonca mcp tools


def _seen(call: Call) -> HookSeen:
    return call.ctx.hooks.setdefault((call.repo, call.auth.session), HookSeen())


# -- hook.event -----------------------------------------------------------------------------------

@method("hook.event", "agent", writes=True)
async def hook_event(call: Call) -> dict:
    return await judge(call, call.params)


async def judge(call: Call, p: dict) -> dict:
    """hook.event's answer to its params `p` (hook.input reads a harness's event into the same)."""
    event, harness = p["hook_event_name"], p.get("harness") or "claude-code"
    tool, tool_input, cwd, base = p.get("tool_name"), p.get("tool_input") or {}, p.get("cwd"), p.get("base")
    ws = os.path.normpath(p["workspace"])
    files = check_files(p["files"]) if p.get("files") is not None else []
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    seen = _seen(call)
    now = d.now_ms()
    seen.last_hook_ms = now
    profile = rs.policy.profile(harness)
    if profile is None:    # the seed: a harness Lonca does not know is denied, whatever the event
        return {"decision": "deny", "reason": f"Lonca does not know the harness {harness[:64]!r}: it can not tell what "
                                              "its tools do. Run the agent in a harness Lonca has a profile of, or "
                                              "give this one a profile in lonca.toml ([harnesses.<name>] events, "
                                              "docs/policy.md)."}
    if event != "PreToolUse" or tool is None:
        return {"decision": "allow", "reason": ""}
    prefix = profile["tool_prefix"] if profile["before_tool_mcp"] else None
    if prefix and tool.startswith(prefix):
        seen.mcp_events.append((tool[len(prefix):], now))
        return {"decision": "allow", "reason": ""}
    rec = rs.sessions[me]
    read_key = profile["read_tools"].get(tool)
    if read_key:
        target = tool_input.get(read_key)
        full = os.path.normpath(os.path.join(cwd or ws, target if isinstance(target, str) else "."))
        if rec.taint is None and not _within(full, [ws, *(rec.scope.get("scratch") or [])]):
            return await d.log.append(rs.name, _taint(call, rs, f"read_outside:{full}"))
        return {"decision": "allow", "reason": ""}
    key, patch = profile["write_tools"].get(tool), patch_of(harness, tool, tool_input)
    if key is None and patch is None:
        return {"decision": "allow", "reason": ""}
    named = written_paths(harness, profile["write_tools"], tool, tool_input)
    if named is None:
        if patch is not None or tool in PATCH_TOOLS:     # the harness refuses it by itself
            return {"decision": "allow", "reason": "the patch could not be read; it is judged at propose"}
        raise LoncaError("invalid", f"tool_input.{key} must be a string: the file {tool} writes")

    def inside(target: str) -> str | None:
        full = os.path.normpath(os.path.join(cwd or ws, target))
        return full[len(ws):].lstrip("/") if full != ws and _within(full, [ws]) else None
    rels = list(dict.fromkeys(r for r in map(inside, named) if r is not None))
    if not rels:
        return {"decision": "allow", "reason": "outside the workspace: not observed"}
    refusal = next(filter(None, (_path_refusal(rec, rel) for rel in rels)), None)
    if refusal:
        return await d.log.append(rs.name, _observation(call, rs, tool, rels, [refusal[0]], refusal[1]))
    held = {f["path"]: f["data"] for f in files}
    if patch is None:
        one = _effect(tool, tool_input, held.get(rels[0]))
        effects = None if one is None else {rels[0]: one}
    else:
        text, folder = patch
        effects = _patch_effects(text, held, lambda t: inside(os.path.join(folder, t) if folder else t))
    if base is None:
        raise LoncaError("invalid", "hook.event of a write tool needs base, the workspace's base commit")
    step = await _step(call, rs, base, held, effects) if effects is not None else None
    if step is None:  # the tool will fail on its own (no such text), or the effect is not text
        return {"decision": "allow", "reason": "the tool's effect could not be computed; it is judged at propose"}
    rec = rs.sessions[me]
    if all(rel in rec.written for rel in rels) and not _lease_verdict(rs, rec, step, d.now_ms())[0]:
        # the hooks saw a write tool write these paths already: another allowed step of them
        # changes nothing the log holds, so it is answered without an entry (a denial is still
        # logged). What the verdict read is made durable first, as a reader's answer is.
        await d.log.settled()
        return {"decision": "allow", "reason": ""}
    # the answer's decision is the tool's (the observe entry itself is always allowed)
    return await d.log.append(rs.name, _observation(call, rs, tool, rels, None, None, step))


def _within(path: str, roots: list[str]) -> bool:
    """Whether a normalised absolute path is one of `roots` or below one (string tests: this runs
    before every tool call)."""
    for r in roots:
        r = os.path.normpath(r)
        if path == r or path.startswith(r if r.endswith("/") else r + "/"):
            return True
    return False


def _taint(call: Call, rs: RepoState, reason: str):
    """The session read what it does not own (seed op `taint`): its proposals wait for a human
    from now on (tainted_session). The read itself runs."""
    def decide() -> Draft:
        op = {"op": "taint", "session": call.auth.session, "reason": reason}
        return Draft(actor=call.auth.actor, op=op, decision=allow(),
                     result=lambda entry: {"decision": "allow", "reason": f"the session is tainted ({reason}): "
                                                                          "its proposals wait for a human"})
    return decide


def _path_refusal(rec: SessionRec, rel: str) -> tuple[str, str] | None:
    """(reason, message) when no write to `rel` can be allowed, whatever it changes."""
    top = rel.split("/", 1)[0]
    if top in (".lonca", ".git"):
        return (f"workspace_private:{rel}", f"Lonca denied this write (workspace_private:{rel}): {top}/ is the "
                "workspace's own (its session token and git state); write only the repository's files.")
    try:
        check_path(rel)
    except LoncaError as e:
        return (f"invalid_path:{rel}", f"Lonca denied this write (invalid_path:{rel}): {e.message}")
    if not scopes.path_in(rec.scope, rel):
        return (f"scope_path:{rel}", f"Lonca denied this write (scope_path:{rel}): {rel} is outside your session's "
                f"scope ({', '.join(rec.scope.get('paths') or ['**'])}); leave it to a session whose scope has it.")
    return None


def _patch_effects(text: str, held: dict, inside) -> dict[str, bytes | None] | None:
    """What a Codex patch leaves in each file it writes ({path: content, None for a deletion}),
    from the files as the workspace holds them (`held`); None when Codex would refuse it.
    `inside` maps a path as the patch names it to the workspace's (None: outside it, not observed)."""
    out: dict[str, bytes | None] = {}
    try:
        for op in apply_patch.parse(text):
            at = inside(op.path)
            content: bytes | None = None    # a deletion
            if op.kind == "add":
                content = (op.content or "").encode()
            elif op.kind == "update":
                if at is None and (not op.move_to or inside(op.move_to) is None):
                    continue        # outside the workspace, and staying there: not observed
                now = out[at] if at in out else held.get(at) if at else None
                if now is None:     # not in the workspace (Codex refuses the patch), or brought in from outside
                    return None
                content = apply_patch.apply(now.decode(), op.chunks).encode()
            if op.move_to:
                if at is not None:
                    out[at] = None
                at = inside(op.move_to)
            if at is not None:
                out[at] = content
    except (apply_patch.PatchError, UnicodeDecodeError):
        return None
    return out


def _effect(tool: str, ti: dict, before: bytes | None) -> bytes | None:
    """The file's content after the tool, None when the tool would fail or does not write text."""
    if tool in ("Write", "write_file"):
        content = ti.get("content")
        return content.encode() if isinstance(content, str) else None
    if before is None or tool == "NotebookEdit":
        return None
    try:
        text = before.decode()
    except UnicodeDecodeError:
        return None
    edits = ti.get("edits") if tool == "MultiEdit" else [ti]
    if not isinstance(edits, list):
        return None
    for e in edits:
        old, new = (e.get("old_string"), e.get("new_string")) if isinstance(e, dict) else (None, None)
        if not isinstance(old, str) or not isinstance(new, str) or not old or old not in text:
            return None
        every = e.get("replace_all") is True or isinstance(e.get("expected_replacements"), int) and e["expected_replacements"] > 1
        if not every and text.count(old) > 1:
            return None
        text = text.replace(old, new) if every else text.replace(old, new, 1)
    return text.encode()


STEP_ON_LOOP_BYTES = 64 * 1024  # a step this small, on a base whose map is held, is judged on the loop


async def _step(call: Call, rs: RepoState, base: str, held: dict, effects: dict[str, bytes | None]):
    """Facts of this write step (_step_facts). A small one on a base whose tree map is held is
    computed on the loop: it reads no store (both sides are in memory), and the hop to a thread
    and back cost more than the step. Otherwise a thread with its own handle reads the base's map
    (and checks the commit exists)."""
    d = call.ctx
    # a trunk of this repository that memory knows (an older base's map is not held anyway)
    base_map = d.tree_maps.held(base, wait=False) if rs.trunks.known(base) and rs.trunks.position(base) is not None else None
    size = sum(len(after or b"") + len(held.get(rel) or b"") for rel, after in effects.items())
    if base_map is not None and size <= STEP_ON_LOOP_BYTES:
        return _step_facts(d.symbols, base_map, held, effects)
    symbols, maps = d.symbols, d.tree_maps

    def work(store: pygit2.Repository):
        if not commit_exists(store, base):
            raise LoncaError("not_found", f"no commit {base} in this repository; sync the workspace")
        return _step_facts(symbols, maps.get(store, base), held, effects)
    return await on_store(call, work)


def _step_facts(symbols, base_map: Mapping[str, TreeEntry], held: dict, effects: dict[str, bytes | None]):
    """Facts of this one step: the files as the workspace holds them (`held`) → as the tool leaves
    them (`effects`, None for a deletion), on the workspace's base, as (facts JSON, containers,
    nesting) like a proposal's (Prepared). Blobs are hashed, not written: nothing of a step lands
    in the store, and only the paths it writes are compared."""
    blobs: dict[str, bytes] = {}

    def entry(rel: str, data: bytes | None) -> TreeEntry | None:
        if data is None:
            return None
        mode = base_map[rel].mode if rel in base_map and base_map[rel].mode in ("100644", "100755") else "100644"
        oid = str(pygit2.hash(data))
        blobs[oid] = data
        return TreeEntry(oid, mode)
    before_map = TreeOverlay(base_map, {rel: entry(rel, held.get(rel)) for rel in effects})
    after_map = TreeOverlay(base_map, {rel: entry(rel, after) for rel, after in effects.items()})
    facts = compute_facts(before_map, after_map, blobs.__getitem__, symbols, paths=list(effects), affected=False)
    return facts_json(facts), facts.containers, facts.nesting


def _observation(call: Call, rs: RepoState, tool: str, rels: list[str], refused: list[str] | None,
                 message: str | None, step: tuple | None = None):
    """The decision of a write step, made in the writer (where leases change), and its observe entry."""
    d, me = call.ctx, call.auth.session

    def decide() -> Draft:
        now = d.now_ms()
        rec = rs.sessions[me]
        reasons, text = (refused, message) if refused else _lease_verdict(rs, rec, step, now)
        outcome = "deny" if reasons else "allow"
        op = {"op": "observe", "session": me,
              "events": [{"kind": "write", "tool": tool, "paths": rels, "decision": outcome, "reasons": reasons}]}
        return Draft(actor=call.auth.actor, op=op, decision=allow(),
                     result=lambda entry: {"decision": outcome, "reason": text or ""})
    return decide


def _lease_verdict(rs: RepoState, rec: SessionRec, step: tuple, now: int) -> tuple[list[str], str | None]:
    """(reasons, message for the model) of a write step (_step_facts); no reasons: allowed."""
    facts, containers, nesting = step
    touched = facts["edits"] + facts["adds"] + facts["deletes"]
    out_of_scope = [s for s in touched if not scopes.symbol_in(rec.scope, s, nesting)]
    if out_of_scope:
        return ([f"scope_symbol:{s}" for s in out_of_scope],
                f"Lonca denied this edit (scope_symbol:{out_of_scope[0]}): it changes {', '.join(out_of_scope)}, "
                "outside your session's scope; leave it to a session whose scope has it.")
    missing, details, _used = lease_standing(rs, rec.id, needed(facts, rs, containers), now, nesting)
    if not missing:
        return [], None
    reasons = [f"lease_missing:{m['symbol']}" for m in missing]
    lines = []
    for m in missing:
        sym = m["symbol"]
        held = [x for x in details if x["symbol"] == sym and x["holder_session"]]
        if held:    # lease_methods.advice words who holds it, for what and until when
            lines.append(f"{advice(held[:1])} Do not edit it now. To wait in line: `lonca lease interest "
                         f"{shlex.quote(sym)} --kind {m['kind']} --intent '<what you will do and why>'`.")
        else:
            names = f" --names {shlex.quote(','.join(m['names']))}" if m.get("names") else ""
            lines.append(f"{sym} is free but your session holds no {m['kind']} lease on it. Take it first: "
                         f"`lonca lease acquire {shlex.quote(sym)} --kind {m['kind']}{names} --intent "
                         f"'<what you will do and why>'` (or the lease_acquire tool), then make this edit again.")
    whole = " A new file needs the lease on path#<file>." if any(m["symbol"].endswith(f"#{FILE}") for m in missing) else ""
    return reasons, f"Lonca denied this edit ({reasons[0]}): " + " ".join(lines) + whole


# -- hook.bind -------------------------------------------------------------------------------------

@method("hook.bind", "agent", writes=True)
async def hook_bind(call: Call) -> dict:
    p = call.params
    harness, harness_session, sudo = p["harness"], p["harness_session"], p["sudo_without_password"]
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    if rs.policy.profile(harness) is None:
        raise LoncaError("invalid", f"no profile for the harness {harness[:64]!r}: bind a harness Lonca has a profile "
                                    "of, or give this one a profile in lonca.toml ([harnesses.<name>] events)")
    _seen(call).last_hook_ms = d.now_ms()

    def decide() -> Draft:
        rec = rs.sessions[me]
        notes = []
        if rec.harness != harness:
            level = "unobserved"
            notes.append(f"the session started with harness {rec.harness!r}, not {harness!r}: its level is not read")
        elif rec.unhooked:
            level = "unobserved"
            notes.append("lonca mcp ran a tool whose before-tool event never came: the level stays unobserved")
        else:
            level = "hooks"
        if sudo:
            notes.append("the agent's user can sudo without a password: it can step around its hooks")
        # a bind sets the level once; a later one may keep or lower it, never raise it
        raises = rec.bound_ms is not None and LEVELS.index(level) > LEVELS.index(rec.level)
        op = {"op": "session.bind", "session": me, "level": rec.level if raises else level,
              "checks": {"harness": harness, "harness_session": harness_session, "sudo_without_password": sudo}}
        decision = {"outcome": "deny", "reasons": ["bind_raises_level"]} if raises else allow()

        def result(entry: dict) -> dict:
            return {"level": rs.sessions[me].level, "notes": notes, "scratch": list(rec.scope.get("scratch") or [])}
        return Draft(actor=call.auth.actor, op=op, decision=decision, result=result)
    return await d.log.append(rs.name, decide)


# -- hook.stop -------------------------------------------------------------------------------------

def local_files(value: list[dict]) -> list[dict]:
    """The local files a hook.stop or session.end names (their shape is the schema's), each once,
    as {"path", "blob": the local blob or None for a deletion}."""
    out, seen = [], set()
    for f in value:
        if f["path"] in seen:
            raise LoncaError("invalid", f"the path {f['path']!r} appears twice; name each file once")
        seen.add(f["path"])
        entry = f.get("entry")  # null (or left out): a deletion
        out.append({"path": f["path"], "blob": entry["blob"] if entry else None})
    return out


async def carried_paths(call: Call, rs: RepoState, files: list[dict], sessions: set[str]) -> set[str]:
    """Paths whose local content a standing proposal of these sessions holds (pending, queued or
    integrated: the same blob, or the deletion). The proposals are read on the loop, their trees
    on a thread with its own handle."""
    standing = [(c.commit, set(c.paths)) for c in rs.changes.values()      # in flight: pending or queued
                if c.session in sessions and c.status["status"] in ("pending", "queued")]
    standing += [(c.commit, set(c.paths)) for c in await integrated_changes(rs, sessions)]
    maps = call.ctx.tree_maps

    def carried(store: pygit2.Repository) -> set[str]:
        out = set()
        for commit, paths in standing:
            m = maps.get(store, commit)
            out |= {f["path"] for f in files
                    if (f["blob"] is None and f["path"] not in m and f["path"] in paths)
                    or (f["blob"] is not None and f["path"] in m and m[f["path"]].oid == f["blob"])}
        return out
    return await on_store(call, carried)


def stop_output(harness: str, paths: list[str], total: int) -> dict:
    """The answer that sends the agent back, in the harness's shape."""
    shown = ", ".join(paths[:8]) + (f" and {total - 8} more" if total > 8 else "")
    reason = (f"Lonca: your workspace has local changes that no proposal carries: {shown}. Propose them before you "
              "finish (`lonca propose -m '<what the change does and why>'` in the workspace, or the propose tool of "
              "lonca mcp), or undo the ones you do not mean to keep.")
    return stop_shape(harness, reason)


@method("hook.stop", "agent", writes=True)
async def hook_stop(call: Call) -> dict:
    p = call.params
    harness = p["harness"]
    files = local_files(p["files"])
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    profile = rs.policy.profile(harness)
    if profile is None or "stop" not in profile["events"].values():    # the seed: no stop event, invalid
        raise LoncaError("invalid", f"the harness {harness[:64]!r} has no stop event in its profile: hook.stop is for "
                                    "a harness whose profile reads one of its events as stop (docs/policy.md)")
    _seen(call).last_hook_ms = d.now_ms()
    carried = await carried_paths(call, rs, files, rs.workspace_sessions(me))
    paths = sorted(f["path"] for f in files if f["path"] not in carried)
    limit = rs.policy.stop_rounds

    def decide() -> Draft:
        rec = rs.sessions[me]
        before = rec.unproposed
        rnd = ((before or {}).get("rounds", 0) + 1) if paths else 0
        event = {"kind": "unproposed", "paths": paths[:32], "total": len(paths), "round": rnd}
        op = {"op": "observe", "session": me, "events": [event]}

        def result(entry: dict) -> dict:
            out = {"unproposed": paths, "total": len(paths), "round": rnd, "limit": limit}
            if paths and rnd <= limit:
                out["output"] = stop_output(harness, paths, len(paths))
            return out
        return Draft(actor=call.auth.actor, op=op, decision=allow(), result=result)
    rec = rs.sessions[me]
    if not paths and rec.unproposed is not None and rec.unproposed["total"] == 0:
        # a clean report is new once after the session began or proposed: not logged again
        return {"unproposed": [], "total": 0, "round": 0, "limit": limit}
    out = await d.log.append(rs.name, decide)
    out.pop("decision", None)   # the observe entry's, always allow: not the report's (seq stays: it was logged)
    return out


# -- mcp.call --------------------------------------------------------------------------------------

@method("mcp.call", "agent", writes=True)
async def mcp_call(call: Call) -> dict:
    tool = call.params["tool"]
    d, rs, me = call.ctx, call.repo_state(), call.auth.session
    rec = rs.sessions[me]
    profile = rs.policy.profile(rec.harness) if rec.harness else None
    if profile is None or not profile["before_tool_mcp"] or rec.level == "isolated":
        return {"checked": False, "hooked": None}
    seen = _seen(call)
    now = d.now_ms()
    while seen.mcp_events and seen.mcp_events[0][1] < now - EVENT_WAIT_MS:
        seen.mcp_events.popleft()
    for i, (name, _when) in enumerate(seen.mcp_events):
        if name == tool:
            del seen.mcp_events[i]
            return {"checked": True, "hooked": True}
    if now < d.started_ms + START_GRACE_MS and rec.created_ms < d.started_ms:
        return {"checked": True, "hooked": True}
    if rec.unhooked is None:
        security_methods.EVENTS.append({"time_ms": now, "kind": "unhooked", "repo": rs.name, "session": me,
                                        "method": "mcp.call", "detail": f"lonca mcp ran {tool} with no before-tool event"})

        def decide() -> Draft:
            op = {"op": "observe", "session": me, "events": [{"kind": "unhooked", "tool": tool}]}
            return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {})
        logged = await d.log.append(rs.name, decide)
        return {"checked": True, "hooked": False, "seq": logged["seq"]}
    return {"checked": True, "hooked": False}


# -- harness.setup ---------------------------------------------------------------------------------

@method("harness.setup", "agent")
async def harness_setup(call: Call) -> dict:
    """The setup part of the harness's profile from the policy ([harnesses.<name>] setup), as
    written, holes unfilled; null when the policy gives none (the built-in profiles have none:
    the client writes its own setup, lonca/harness.py)."""
    profile = call.repo_state().policy.profile(call.params["harness"])
    return {"setup": profile.get("setup") if profile else None}
