"""The CLI for runners (seed 001, "CLI for runners"): session start / end / heartbeat / rotate, workspace
create, sync, propose, lease acquire / release / renew / interest, events, symbols, preview,
negotiate, pending, approve, reject, priority, redact. Each takes --json and then prints one JSON value of the
seed's shape on stdout (for symbols, preview and negotiate: the result of the method of that name)."""
import getpass
import json
import secrets
import sys
from pathlib import Path

from lonca import harness
from lonca import workspace as wsp
from lonca.admin_commands import human_call, human_name, human_submit, human_token, need_key, pick_repo, reader
from lonca.client import Client
from lonca.mcp_session import AgentSession
from lonca.mcp_tools import BY_NAME
from lonca.output import OK, Usage, command, decision_exit, emit_json, paint
from lonca.protocol import now_ms, session_start_op


def register(sub) -> None:
    s = sub.add_parser("session", help="agent sessions and their workspaces").add_subparsers(dest="session_cmd", metavar="COMMAND")
    st = command(s, "start", "start an agent session (signed by you) in a new workspace", cmd_session_start, repo=True)
    st.add_argument("--agent", help="the agent's name (default: agent, or the continued session's)")
    st.add_argument("--model")
    st.add_argument("--task")
    st.add_argument("--paths", nargs="+", metavar="GLOB",
                    help="the scope's paths (default: all, or the continued session's)")
    st.add_argument("--scratch", action="append", metavar="DIR",
                    help="a directory outside the workspace for the agent's notes and logs (repeatable)")
    st.add_argument("--ttl-minutes", type=int, default=240)
    st.add_argument("--dir", help="the workspace folder (default: ./<repo>-<session>)")
    st.add_argument("--continue", dest="continue_dir", metavar="DIR",
                    help="take over the workspace DIR: its files, base and change in flight; its session ends")
    st.add_argument("--widen", action="store_true", help="with --continue: allow a scope wider than the old one")
    harness.add_start_args(st)
    jn = command(s, "join", "make the workspace of a session a human started in the console (the token it "
                            "showed once is read from stdin)", cmd_session_join)
    jn.add_argument("--dir", help="the workspace folder (default: ./<repo>-<session>)")
    command(s, "end", "end the session of this workspace", cmd_session_end)
    command(s, "heartbeat", "tell the worker this session is alive", cmd_heartbeat)
    command(s, "rotate", "replace this workspace's session token (the old one stops working)", cmd_session_rotate)

    w = sub.add_parser("workspace", help="workspaces").add_subparsers(dest="workspace_cmd", metavar="COMMAND")
    command(w, "create", "a git checkout of trunk for your own changes (propose, sync); agents get one with session start",
            cmd_workspace_create, repo=True).add_argument("--dir")

    command(sub, "sync", "bring trunk into this workspace with the symbol merge (an agent's, or yours from "
                         "`workspace create`)", cmd_sync, human=True)
    pp = command(sub, "propose", "propose this workspace's local changes: as its agent in an agent's workspace, "
                              "else as you (a workspace of `workspace create`, or a git checkout of trunk), "
                              "signed with your key", cmd_propose, repo=True)
    pp.add_argument("--intent", "-m", default="", help="what the change does and why")
    pp.add_argument("--revert-of", metavar="CHANGE", help="as a human: the change this one reverts (its id or first letters)")

    lease = sub.add_parser("lease", help="leases on symbols").add_subparsers(dest="lease_cmd", metavar="COMMAND")
    la = command(lease, "acquire", "take a lease set on symbols", cmd_lease_acquire)
    la.add_argument("symbols", nargs="+")
    la.add_argument("--kind", choices=["edit", "insert", "rename", "shared"], default="edit")
    la.add_argument("--names", help="for insert: the bare names you add, comma-separated")
    la.add_argument("--intent", default="")
    la.add_argument("--ttl-ms", type=int, default=600_000)
    la.add_argument("--set")
    command(lease, "release", "release a lease set", cmd_lease_release).add_argument("set")
    rn = command(lease, "renew", "renew a lease set", cmd_lease_renew)
    rn.add_argument("set")
    rn.add_argument("--ttl-ms", type=int)
    li = command(lease, "interest", "say you wait for symbols someone holds", cmd_lease_interest)
    li.add_argument("symbols", nargs="+")
    li.add_argument("--kind", choices=["edit", "insert", "rename", "shared"], default="edit")
    li.add_argument("--intent", default="")

    command(sub, "events", "what happened to this session's changes and leases", cmd_events) \
        .add_argument("--from", dest="start", type=int)

    sy = command(sub, "symbols", "the symbols of one file at trunk: the ids to lease", cmd_symbols, repo=True)
    sy.add_argument("path")
    sy.add_argument("--commit", help="a commit id (default: trunk)")
    command(sub, "preview", "the facts of this workspace's local changes and the leases they need (logs nothing)",
            cmd_preview)
    ng = command(sub, "negotiate", "send another session a message: claim, yield, counter, accept, decline",
                 cmd_negotiate)
    ng.add_argument("to_session", help="the session you write to (status and lease details name it)")
    ng.add_argument("type", choices=list(MESSAGE_FIELDS))
    ng.add_argument("--thread", help="the conversation (default: a new one; answer with the one you were sent)")
    ng.add_argument("--symbols", nargs="+", metavar="SYMBOL", help="claim: the symbols you want")
    ng.add_argument("--reason", help="claim: why you want them")
    ng.add_argument("--set", help="yield: the lease set you hand to the session")
    ng.add_argument("--free", action="store_true", help="yield: free the set instead of handing it over")
    ng.add_argument("--note", help="counter, decline: what you say")

    command(sub, "pending", "what waits for a human", cmd_pending, repo=True)
    ap = command(sub, "approve", "approve a pending operation (signed with your key: the file key, or your security key)", cmd_approve, repo=True)
    ap.add_argument("seq", type=int)
    ap.add_argument("--checks", help="named checks the change owes from now on, comma-separated")
    ap.add_argument("--note")
    rj = command(sub, "reject", "reject a pending operation (signed with your key: the file key, or your security key)", cmd_reject, repo=True)
    rj.add_argument("seq", type=int)
    rj.add_argument("--reason", required=True)
    pr = command(sub, "priority", "put a queued change ahead of the changes it is independent of (signed with "
                 "your file key)", cmd_priority, repo=True)
    pr.add_argument("change", help="the change id, or its first letters (at least 4)")
    rd = command(sub, "redact", "serve a blob as null from now on: tree, blobs, diffs and bundles leave its bytes "
                 "out (signed with your key; the store keeps the object, docs/decisions.md)", cmd_redact, repo=True)
    rd.add_argument("blob", help="the blob's git id (40 hex digits, as the tree method lists it)")
    rd.add_argument("--reason", required=True, help="why, for the log (1 to 4096 bytes)")


def _logged(args, out: dict, text: str) -> int:
    if args.json:
        emit_json(out)
    else:
        outcome = out["decision"]["outcome"] if out.get("decision") else "ok"
        print(f"{paint(outcome, '32' if outcome == 'allow' else '33' if outcome == 'escalate' else '31')}  {text}")
    return decision_exit(out.get("decision"))


# -- sessions and workspaces ---------------------------------------------------------------------

def cmd_session_start(args) -> int:
    if args.continue_dir:
        return _session_continue(args)
    if args.widen:
        raise Usage("--widen goes with --continue")
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    sid = f"s-{secrets.token_hex(6)}"
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        dest = Path(args.dir or f"{repo}-{sid}")
        if dest.exists() and any(dest.iterdir()):
            raise Usage(f"{dest} exists and is not empty")
        op = session_start_op(sid, args.agent or "agent", now_ms() + args.ttl_minutes * 60_000, args.paths,
                              args.model, args.task, [str(Path(d).resolve()) for d in args.scratch or []])
        if args.harness:
            op["harness"] = args.harness
        res = human_submit(c, name, repo, op)
        ws = wsp.create(c, repo, res["token"], dest, sid)
        wsp.write_token(ws.root, res["token"], op["expires_ms"])
    _left_out(ws.redacted)
    return _started(args, op, res, ws.root, None)


def _started(args, op: dict, res: dict, root: Path, continues: str | None) -> int:
    out = {"session": op["session"], "workspace": str(root), "expires_ms": op["expires_ms"],
           "paths": op["scope"]["paths"], "scratch": op["scope"].get("scratch", []), "seq": res["seq"],
           "decision": res["decision"], "continues": continues,
           "setup": harness.start_setup(args, root, op["session"]) if "token" in res else None}
    verb = f"session {op['session']} continues {continues} in" if continues else f"session {op['session']} in"
    return _logged(args, out, f"{verb} {root}")


def _session_continue(args) -> int:
    """session start --continue DIR: a new session, signed by the human, takes over the workspace;
    its files, base and manifest stay, and the old session's token is replaced by the new one.
    What is not given (agent, model, task, scope, harness) is the old session's, as status has it;
    the workspace holds the old harness's setup already, so setup is written for --harness only."""
    if args.dir:
        raise Usage("--continue names the workspace; --dir goes with a new one")
    ws = wsp.find(Path(args.continue_dir))
    if ws.root != Path(args.continue_dir).resolve():
        raise Usage(f"{args.continue_dir} is inside the workspace {ws.root}; name the workspace itself")
    if ws.session is None:
        raise Usage(f"{ws.root} is a reading workspace (workspace create) with no session to continue")
    if args.repo and args.repo != ws.repo:
        raise Usage(f"the workspace {ws.root} is of the repository {ws.repo}, not {args.repo}")
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    sid = f"s-{secrets.token_hex(6)}"
    with Client() as c:
        sessions = human_call(c, name, "status", repo=ws.repo)["sessions"]
        old = next((s for s in sessions if s["id"] == ws.session), None) or {}
        scope = dict(old.get("scope") or {"paths": ["**"], "symbols": None, "ops": [], "max_files": None,
                                          "max_lines": None, "scratch": []})
        if args.paths:
            scope["paths"] = args.paths
        if args.scratch is not None:
            scope["scratch"] = [str(Path(d).resolve()) for d in args.scratch]
        op = {"op": "session.start", "session": sid, "agent": args.agent or old.get("agent") or "agent",
              "model": args.model or old.get("model"), "task": args.task or old.get("task"),
              "expires_ms": now_ms() + args.ttl_minutes * 60_000, "scope": scope, "continues": ws.session}
        if args.widen:
            op["widen"] = True
        if args.harness or old.get("harness"):   # setup is written only for a --harness given here
            op["harness"] = args.harness or old["harness"]
        res = human_submit(c, name, ws.repo, op)
        if "token" in res:  # allowed: the workspace is the new session's from now on
            wsp.write_token(ws.root, res["token"], op["expires_ms"])
            ws.session = sid
            ws.save()
    return _started(args, op, res, ws.root, op["continues"])


def read_agent_token() -> str:
    """The agent token from stdin, never from the command line (which shells keep in their
    history and `ps` shows): pasted at a prompt that does not echo, or piped."""
    if sys.stdin.isatty():
        token = getpass.getpass("the agent's token, shown once in the console (it is not echoed): ")
    else:
        token = sys.stdin.readline()
    token = token.strip()
    if not token.startswith("lonca_") or token.startswith("lonca_h_"):
        raise Usage("that is not an agent token: paste the token the console showed once when it started the session")
    return token


def cmd_session_join(args) -> int:
    """The CLI half of a session started in the console: the console signed session.start with
    the human's passkey and showed the agent's token once; this puts it where `session start`
    would have (<workspace>/.lonca/session, 0600) beside a checkout of trunk."""
    token = read_agent_token()
    with Client() as c:
        me = c.call("whoami", {}, token=token)
        rec = me.get("session")
        if rec is None or "repo" not in me:
            raise Usage("that token is not an agent session's")
        repo, sid = me["repo"], rec["id"]
        dest = Path(args.dir or f"{repo}-{sid}")
        ws = wsp.create(c, repo, token, dest, sid)
        wsp.write_token(ws.root, token, rec["expires_ms"])
    _left_out(ws.redacted)
    setup = None
    if rec.get("harness") in harness.HARNESSES:     # named in the signed session.start
        setup = harness.setup(rec["harness"], ws.root)
        refused = harness.refusals(ws.root, setup["files"])
        if refused:
            raise Usage(f"the workspace {ws.root} is ready, but its {rec['harness']} setup was refused: " + "; ".join(refused))
        harness.write(ws.root, setup)
    out = {"session": sid, "workspace": str(ws.root), "repo": repo, "expires_ms": rec["expires_ms"],
           "paths": rec["scope"]["paths"], "scratch": rec["scope"].get("scratch", []), "setup": setup}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('joined', '32')}  session {sid} of {repo} in {ws.root}: cd there and work as the agent")
    return OK


def cmd_session_end(args) -> int:
    ws = wsp.find()
    with Client() as c:
        res = c.call("session.end", {"files": wsp.end_files(ws)}, repo=ws.repo, token=ws.agent_token())
    wsp.token_file(ws.root).unlink(missing_ok=True)
    out = {"session": ws.session, "seq": res["seq"], "decision": res["decision"]}
    if not args.json and res.get("unproposed"):
        print(f"left unproposed: {', '.join(res['unproposed'])}", file=sys.stderr)
    return _logged(args, out, f"session {ws.session} ended")


def cmd_heartbeat(args) -> int:
    ws = wsp.find()
    # `session end` took the token away: the daemon then answers unauthenticated (exit 1), as the
    # seed says of a session that is over, where a missing token would otherwise be a usage error
    token = ws.agent_token() if wsp.token_file(ws.root).exists() else None
    with Client() as c:
        res = c.call("session.heartbeat", {}, repo=ws.repo, token=token)
    out = {"session": ws.session, "seq": res["seq"], "timeout_ms": res["timeout_ms"], "leases": res["leases"]}
    return _logged(args, out, f"alive; next heartbeat within {res['timeout_ms'] // 3} ms; {len(res['leases'])} lease sets")


def cmd_session_rotate(args) -> int:
    """session.rotate, and the new token written where the old one was (seed 001)."""
    ws = wsp.find()
    token = ws.agent_token()
    expires = json.loads(wsp.token_file(ws.root).read_text()).get("expires_ms")
    with Client() as c:
        res = c.call("session.rotate", {}, repo=ws.repo, token=token)
    wsp.write_token(ws.root, res["token"], expires)
    out = {"session": ws.session, "token_file": str(wsp.token_file(ws.root))}
    if args.json:
        emit_json(out)
    else:
        print(f"session {ws.session}: a new token is in {out['token_file']}; the old one no longer works")
    return OK


def _left_out(paths: list[str]) -> None:
    """The human message for trunk's files a workspace holds no copy of (the --json field is
    `redacted`)."""
    if paths:
        print(f"{len(paths)} files of trunk are redacted and left out of this workspace (a human redacted their "
              f"blobs; the worker serves them as null): {', '.join(paths[:10])}" + (" …" if len(paths) > 10 else ""),
              file=sys.stderr)


def cmd_workspace_create(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        ws = wsp.create(c, repo, human_token(c, name), Path(args.dir or f"{repo}-workspace"), None)
    out = {"workspace": str(ws.root), "repo": repo, "base": ws.base, "redacted": ws.redacted}
    if args.json:
        emit_json(out)
    else:
        print(f"workspace {ws.root} at {ws.base[:12]}" + (" (built from tree and blobs, without history)" if ws.head else ""))
        _left_out(ws.redacted)
    return OK


def cmd_sync(args) -> int:
    """In an agent's workspace as the agent; in a human's (`workspace create`: no session) as the
    human, with their session (trunk.merge takes either)."""
    ws = wsp.find()
    with Client() as c:
        token = ws.agent_token() if ws.session else human_token(c, human_name(args))
        out = wsp.sync(ws, c, token)
    if args.json:
        emit_json(out)
    else:
        if out["base_before"] == out["base_after"]:
            print("up to date with trunk")
        else:
            print(f"trunk {out['base_before'][:12]} → {out['base_after'][:12]}: {len(out['updated'])} files updated, "
                  f"{len(out['merged'])} merged")
        for cf in out["conflicts"]:
            print(f"{paint('conflict', '31')} {cf['path']}: {', '.join(cf['symbols'])}" + (f" (trunk's copy: {cf['trunk_copy']})" if cf["trunk_copy"] else ""))
        _left_out(out["redacted"])
    return OK


def cmd_propose(args) -> int:
    ws = wsp.find_or_checkout()
    if ws.session is None or args.human:
        return _propose_as_human(args, ws)
    if args.revert_of:
        raise Usage("--revert-of goes with a human's change (an agent's claim is made from its facts)")
    with Client() as c:
        out = wsp.propose(ws, c, args.intent)
    text = f"change {out['change'][:12]} {out['status']}"
    if not args.json:
        for d in out["details"]:
            if d["holder_session"]:
                print(f"  {d['symbol']}: held by {d['holder_agent']} ({d['holder_session']}) for \"{d['intent']}\"", file=sys.stderr)
    return _logged(args, out, text)


def _propose_as_human(args, ws: wsp.Workspace) -> int:
    """A human's own change (seed 001, human.prepare_change): the files that differ from the
    checkout's base, built and checked by the worker, the change.propose it answers signed with
    the human's key (a file key or a security key) and submitted unchanged. No lease."""
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    files = wsp.proposal_files(ws) if ws.repo else None
    with Client() as c:
        repo = ws.repo or pick_repo(c, name, args.repo)
        if files is None:  # a git checkout: its local commits are part of the change
            ws.base = _trunk_ancestor(c, name, repo, ws.root)
            files = wsp.proposal_files(ws, wsp.checkout_changes(ws.root, ws.base))
        revert_of = args.revert_of
        if revert_of and len(revert_of) < 32:
            revert_of = human_call(c, name, "change.resolve", {"prefix": revert_of}, repo=repo)["change"]
        params = {"base": ws.base, "files": files, "change": None, "author": name, "intent": args.intent,
                  "revert_of": revert_of}
        prepared = human_call(c, name, "human.prepare_change", params, repo=repo)
        res = human_submit(c, name, repo, prepared["op"])
    if not args.json:
        for note in prepared["syntax_errors"]:
            print(f"  note: {note}", file=sys.stderr)
    out = {"change": res["change"], "commit": res["commit"], "seq": res["seq"], "decision": res["decision"],
           "status": res["status"], "details": res["details"]}
    return _logged(args, out, f"change {out['change'][:12]} {out['status']}")


TRUNK_SEARCH = 200  # commits of a checkout's history looked at for one that was trunk


def _trunk_ancestor(c: Client, name: str, repo: str, root: Path) -> str:
    """The newest commit of the checkout's first-parent history that was trunk (trunk.distance):
    the base of a human's change made there, local commits included."""
    for commit in wsp.git(root, "rev-list", "--first-parent", f"--max-count={TRUNK_SEARCH}", "HEAD").decode().split():
        if human_call(c, name, "trunk.distance", {"base": commit}, repo=repo)["behind"] is not None:
            return commit
    raise Usage(f"none of this checkout's last {TRUNK_SEARCH} commits was trunk of {repo}: work from a checkout of "
                "its trunk (lonca workspace create)")


# -- leases ---------------------------------------------------------------------------------------

def _items(args) -> list[dict]:
    out = []
    for sym in args.symbols:
        item = {"symbol": sym, "kind": args.kind}
        if getattr(args, "names", None):
            item["names"] = [n for n in args.names.split(",") if n]
        out.append(item)
    return out


def _lease_call(args, method: str, params: dict, text: str) -> int:
    ws = wsp.find()
    with Client() as c:
        res = c.call(method, params, repo=ws.repo, token=ws.agent_token())
    out = {"seq": res["seq"], "decision": res["decision"], "set": res.get("set"), "details": res.get("details", [])}
    if "warnings" in res:   # lease.acquire's: what the lease names that trunk does not have (granted all the same)
        out["warnings"] = res["warnings"]
    if not args.json:
        for d in out["details"]:
            print(f"  {d['code']}: {d['symbol']} — {d['holder_agent']} ({d['holder_session']}): {d['intent']}", file=sys.stderr)
        if res.get("advice"):
            print(res["advice"], file=sys.stderr)
        for w in out.get("warnings", []):
            print(f"warning: {w}", file=sys.stderr)
    return _logged(args, out, text.format(set=out["set"]))


def cmd_lease_acquire(args) -> int:
    return _lease_call(args, "lease.acquire", {"set": args.set, "items": _items(args), "intent": args.intent,
                                               "ttl_ms": args.ttl_ms}, "lease set {set}")


def cmd_lease_release(args) -> int:
    return _lease_call(args, "lease.release", {"set": args.set}, "released {set}")


def cmd_lease_renew(args) -> int:
    return _lease_call(args, "lease.renew", {"set": args.set, "ttl_ms": args.ttl_ms}, "renewed {set}")


def cmd_lease_interest(args) -> int:
    return _lease_call(args, "lease.interest", {"items": _items(args), "intent": args.intent}, "waiting in line")


def cmd_events(args) -> int:
    ws = wsp.find()
    with Client() as c:
        res = c.call("events", {"from": args.start}, repo=ws.repo, token=ws.agent_token())
    if args.json:
        emit_json(res)
    else:
        for e in res["events"]:
            print(f"{e.get('seq', '-'):>6}  {e['kind']:<16} " + ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("seq", "kind")))
        print(f"next: --from {res['next']}")
    return OK


# -- reading and settling -----------------------------------------------------------------------

# the fields each message type of `negotiate` carries (seed 001, "negotiate"), as the options that give them
MESSAGE_FIELDS = {"claim": ("symbols", "reason"), "yield": ("set",), "counter": ("note",), "accept": (),
                  "decline": ("note",)}


def _agent_tool(name: str, params: dict) -> dict:
    """One of `lonca mcp`'s tools, run as this workspace's agent: one implementation for both."""
    session = AgentSession.open(Path.cwd())
    try:
        return BY_NAME[name].run(session, params)
    finally:
        session.client.close()


def cmd_symbols(args) -> int:
    with Client() as c:
        _, read = reader(c, args)
        out = read("symbols", {"path": args.path, "commit": args.commit})
    if args.json:
        emit_json(out)
        return OK
    print(f"{out['path']} at {out['commit'][:12]}: {out['language'] or 'no parser'} ({out['status']})")
    for sym in out["symbols"]:
        print(f"  {sym['id']:<48} {sym['kind']:<10} lines {sym['start_line']}-{sym['end_line']}")
    for err in out["syntax_errors"]:
        print(f"note: {err}", file=sys.stderr)
    return OK


def cmd_preview(args) -> int:
    out = _agent_tool("preview", {})
    if args.json:
        emit_json(out)
        return OK
    facts = out["facts"]
    for field in ("edits", "adds", "deletes", "signature_changes"):
        if facts.get(field):
            print(f"{field}: {', '.join(facts[field])}")
    print(f"+{facts['lines_added']} -{facts['lines_removed']} lines")
    for d in out["leases"]:
        theirs = d["holder_session"] and d["code"] != "held_by_you"
        who = f" by {d['holder_agent']} (session {d['holder_session']}) for \"{d['intent']}\"" if theirs else ""
        print(f"  {d['code']:<12} {d['needed_kind']:<7} {d['symbol']}{who}")
    if out["acquire"]:
        kinds = {i["kind"] for i in out["acquire"]}
        syms = " ".join(f"'{i['symbol']}'" for i in out["acquire"])
        print(f"free: lonca lease acquire {syms}" + (f" --kind {kinds.pop()}" if len(kinds) == 1 else "")
              + ' --intent "…"')
    if out.get("advice"):
        print(out["advice"], file=sys.stderr)
    return OK


def cmd_negotiate(args) -> int:
    message: dict = {"type": args.type}
    for field in MESSAGE_FIELDS[args.type]:
        value = getattr(args, field)
        if not value:
            raise Usage(f"negotiate {args.type} needs --{field}")
        message[field] = value
    given = [f for f in ("symbols", "reason", "set", "note") if getattr(args, f) and f not in MESSAGE_FIELDS[args.type]]
    if given or (args.free and args.type != "yield"):
        raise Usage(f"negotiate {args.type} takes no --{(given or ['free'])[0]}")
    if args.type == "yield" and not args.free:
        message["to"] = args.to_session   # the set moves to the session in the same entry
    thread = args.thread or f"t-{secrets.token_hex(4)}"
    res = _agent_tool("negotiate", {"thread": thread, "to_session": args.to_session, "message": message})
    out = {"seq": res["seq"], "decision": res["decision"], "thread": thread}
    return _logged(args, out, f"{args.type} to {args.to_session} in thread {thread}")


# -- humans deciding ----------------------------------------------------------------------------

def cmd_pending(args) -> int:
    with Client() as c:
        _, read = reader(c, args)
        pending = read("status")["pending"]
    if args.json:
        emit_json(pending)
    else:
        for p in pending:
            print(f"{p['seq']:>6}  {(p['change'] or '')[:12]:<12}  {p['agent'] or p['actor']}: {p['intent'] or p['op']}  "
                  f"[{', '.join(p['reasons'])}]  {', '.join(p['paths'])}")
        if not pending:
            print("nothing waits for a human")
    return OK


def _decide(args, op: dict) -> int:
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        res = human_submit(c, name, repo, op)
    out = {"seq": res["seq"], "target_seq": args.seq, "change": res.get("change"), "decision": res["decision"]}
    return _logged(args, out, f"{op['op']} of {args.seq}" + (f" (change {out['change'][:12]})" if out["change"] else ""))


def cmd_approve(args) -> int:
    op = {"op": "approve", "target_seq": args.seq, "note": args.note}
    if args.checks:
        op["checks"] = sorted({c for c in args.checks.split(",") if c})
    return _decide(args, op)


def cmd_reject(args) -> int:
    return _decide(args, {"op": "reject", "target_seq": args.seq, "reason": args.reason})


def cmd_redact(args) -> int:
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        res = human_submit(c, name, repo, {"op": "redact", "blob": args.blob, "reason": args.reason})
    return _logged(args, {"seq": res["seq"], "blob": args.blob, "decision": res["decision"]}, f"redact of blob {args.blob[:12]}")


def cmd_priority(args) -> int:
    name = human_name(args)
    need_key(name)      # before the worker is asked anything
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        change = args.change
        if len(change) < 32:
            change = human_call(c, name, "change.resolve", {"prefix": change}, repo=repo)["change"]
        res = human_submit(c, name, repo, {"op": "priority", "change": change})
    return _logged(args, {"seq": res["seq"], "change": change, "decision": res["decision"]},
                   f"priority of change {change[:12]}")
