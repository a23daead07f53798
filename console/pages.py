"""The console's pages. Each page renders whole for a browser and as its live fragment alone for
htmx (HX-Request), which refreshes it on log entries (`lonca:log`, or `lonca:state` for all but heartbeats and other observations: see static/live.js)."""
import asyncio
import base64
import functools

from markupsafe import escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from lonca.client import Unreachable
from lonca.protocol import LoncaError, now_ms

from . import expand, plots, queue_stats, running, versions, views
from .actions import serves_repositories
from .guard import HEADER, NotLoggedIn, call, describe, session_of, whole

QUEUE_COLUMNS = ("queued", "verifying", "integrated", "conflicted", "failed")
STOPPED = ("conflicted", "failed", "rejected", "withdrawn")
RECENT = 20
LOG_SHOWN = 200
REVIEW_ROWS_KEPT = 8     # review tables kept, by repository and log position
# The worker's refusals of what the request asked (a path param or query value it refuses as
# `invalid`, a repository that is not there) are the asker's to fix: a 4xx with the worker's
# message. Anything else it answers (git, integrity, internal) is the server's: 502.
STATUS_OF = {"invalid": 400, "not_found": 404, "forbidden": 403, "too_large": 413, "rate_limited": 429,
             "foreign_key": 409}


def render(request: Request, template: str, ctx: dict, fragment: str | None = None, status: int = 200) -> Response:
    s = session_of(request)
    if s.logged_in and status == 200 and ctx.get("repo"):
        s.last_repo = ctx["repo"]
    base = {"request": request, "human": s.human if s.logged_in else None, "csrf": s.csrf, "now_ms": now_ms(),
            "nav_repo": ctx.get("repo") or (s.last_repo if s.logged_in else None)}
    name = fragment if fragment and request.headers.get("hx-request") else template
    return request.app.state.templates.TemplateResponse(request, name, {**base, **ctx}, status_code=status)


def to_login(request: Request) -> Response:
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": "/login"})
    return RedirectResponse("/login", status_code=303)


def page(fn):
    """A page that needs a human session and shows the worker's refusals as its error."""
    @functools.wraps(fn)  # its name and source stay the page's (tracebacks, tests/console/test_console_fuzz.py)
    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except NotLoggedIn:
            return to_login(request)
        except (LoncaError, Unreachable) as e:
            status = STATUS_OF.get(e.code, 502) if isinstance(e, LoncaError) else 502
            return render(request, "error.html", {"error": describe(e), "repo": request.path_params.get("repo")},
                          "_error.html", status)
    return handler


async def home(request: Request) -> Response:
    s = session_of(request)
    if not s.logged_in:
        try:
            serving = await serves_repositories(request)
        except Unreachable as e:
            return render(request, "error.html", {"error": describe(e)}, status=502)
        return RedirectResponse("/login" if serving else "/enrol", status_code=303)
    try:
        repos = await call(request, "repo.list")
    except NotLoggedIn:
        return to_login(request)
    return RedirectResponse(f"/r/{repos[0]}/review" if repos else "/repos", status_code=303)


async def enrol(request: Request) -> Response:
    return render(request, "enrol.html", {})


async def recover(request: Request) -> Response:
    return render(request, "recover.html", {"name": request.query_params.get("human", "")})


async def login(request: Request) -> Response:
    return render(request, "login.html", {"name": request.query_params.get("human", "")})


@page
async def repos(request: Request) -> Response:
    names = await call(request, "repo.list")
    states = await asyncio.gather(*(call(request, "status", {"lists": ["pending", "sessions"]}, repo=n) for n in names))
    policies = await asyncio.gather(*(_policy_text(request, n, st["policy"]) for n, st in zip(names, states)))
    cedars = await asyncio.gather(*(_policy_text(request, n, st["policy"], "policy.cedar") for n, st in zip(names, states)))
    if names and session_of(request).last_repo not in names:
        session_of(request).last_repo = names[0]
    # restored logs on another daemon key: whoami lists them, repo.list does not (seed)
    foreign = [r for r in (await call(request, "whoami"))["repos"] if r not in names]
    foreign_states = await asyncio.gather(*(call(request, "status", HEADER, repo=r) for r in foreign))
    return render(request, "repos.html", {"repos": list(zip(names, states)), "policies": dict(zip(names, policies)),
                                          "foreign": list(zip(foreign, foreign_states)),
                                          "cedars": dict(zip(names, cedars)),
                                          "requests": request.app.state.enrolments.all(),
                                          "namesakes": request.app.state.enrolments.namesakes()}, "_repos.html")


@page
async def keys(request: Request) -> Response:
    names = await call(request, "repo.list")
    states = await asyncio.gather(*(call(request, "status", HEADER, repo=n) for n in names))
    if names and session_of(request).last_repo not in names:
        session_of(request).last_repo = names[0]
    pong = await request.app.state.pool.call("ping")
    return render(request, "keys.html", {"repos": list(zip(names, states)), "pong": pong,
                                         "hardened": any(st["profile"] == "hardened" for st in states)})


async def _policy_text(request: Request, repo: str, commit: str, name: str = "lonca.toml") -> str:
    """lonca.toml (or policy.cedar) in force, empty when the policy commit has none (the defaults
    hold; no Cedar decides); read once a commit, as the page is drawn again on every log entry."""
    known = request.app.state.policy_texts
    if (repo, commit, name) not in known:
        try:
            got = await call(request, "blobs", {"commit": commit, "paths": [name]}, repo=repo)
            text = base64.b64decode(got[0]["content_b64"] or "").decode("utf-8", "replace")  # null: redacted
        except LoncaError as e:
            if e.code != "not_found":
                raise
            text = ""
        if len(known) >= 256:
            known.clear()
        known[(repo, commit, name)] = text
    return known[(repo, commit, name)]


@page
async def security(request: Request) -> Response:
    events = await call(request, "security.events", {"since_ms": None})
    # a cloned authenticator's key, once per repository and name, to revoke from here
    seen = sorted({(e["repo"], e["human"]) for e in events["events"]
                   if e["kind"] == "cloned_authenticator" and e.get("repo") and e.get("human")})
    cloned = [(repo, human) for repo, human in seen  # rare: a status each, to leave out keys revoked already
              if human in (await call(request, "status", HEADER, repo=repo))["humans"]]
    return render(request, "security.html", {"events": events, "console": request.app.state.console_events,
                                             "cloned": cloned}, "_security.html")


@page
async def review(request: Request) -> Response:
    repo = request.path_params["repo"]
    st = await call(request, "status", HEADER, repo=repo)
    kept = request.app.state.review_rows
    rows = kept.get((repo, st["head_hash"]))
    if rows is None:
        # the pending entries are a function of the log's position (head_hash): at the same
        # position, another drawing (another browser, a refresh) reuses the rows written
        st = await call(request, "status", {"lists": ["pending"]}, repo=repo)
        pending = sorted(st["pending"], key=lambda p: p["created_ms"])
        rows = kept[(repo, st["head_hash"])] = (len(pending), views.review_rows(repo, pending))
        while len(kept) > REVIEW_ROWS_KEPT:
            del kept[next(iter(kept))]
    return render(request, "review.html", {"repo": repo, "st": st, "count": rows[0], "rows": rows[1]}, "_review.html")


@page
async def change(request: Request) -> Response:
    repo, cid = request.path_params["repo"], request.path_params["change"]
    rec, diff, st = await asyncio.gather(call(request, "change.get", {"change": cid}, repo=repo),
                                         call(request, "change.diff", {"change": cid, "format": None}, repo=repo),
                                         call(request, "status", {"lists": ["leases", "pending"]}, repo=repo))
    symbols = {s for f in diff["files"] for kind in f["symbols"].values() for s in kind}
    session = rec["session"]
    leases = [lease for lease in st["leases"] if lease["session"] == session
              or any(i.get("symbol") in symbols for i in lease["items"])]
    pending = next((p for p in st["pending"] if p.get("change") == cid), None)
    split = request.query_params.get("view") == "split"
    colours = views.coloured_now(diff["diff"])
    if not colours:
        views.colour_later(diff["diff"])
    tries = request.query_params.get("colours", "")
    timeline = await request.app.state.timelines.of(
        lambda start, limit: call(request, "log", {"from": start, "limit": limit}, repo=repo),
        repo, cid, rec.get("versions") or [rec["proposed_seq"]], st["next_seq"])
    comments = await versions.comment_states(lambda m, p: call(request, m, p, repo=repo), request.app.state.trees,
                                             timeline.comments(), timeline.commits(), rec["version"])
    return render(request, "change.html", {
        "repo": repo, "rec": rec, "diff": diff, "files": views.diff_tables(diff["diff"], pending is not None, split, colours, f"/r/{repo}/context?commit={diff['commit']}"),
        "split": split,
        "colours": colours, "colour_try": (whole(tries, 0, 99) or 0) + 1, "st": st, "comments": comments,
        "claims": views.claims_body(cid, rec["commit"], rec.get("claim"), rec.get("facts")), "leases": leases, "pending": pending,
        "symbols": views.symbol_blocks(diff["base"], diff["commit"], diff["files"], pending is not None),
        "timeline": timeline, "approvals": timeline.notes_for(pending["seq"]) if pending else [],
        "queue_place": st["queue"].index(cid) + 1 if cid in st["queue"] else None},
        "_change.html")


@page
async def context(request: Request) -> Response:
    """Hidden lines of a diff, asked for by a gap row's button (console/expand.py): rows to
    swap in for it."""
    repo = request.path_params["repo"]
    try:
        ask = expand.Ask.parse(request.query_params)
    except ValueError as e:
        return HTMLResponse(f'<tr class="note"><td colspan="4">{escape(str(e))}</td></tr>', status_code=400)
    lines = await request.app.state.file_lines.of(lambda m, p: call(request, m, p, repo=repo), ask.commit, ask.path)
    if lines is None:
        return HTMLResponse('<tr class="note"><td colspan="4">This file is not text, or it is redacted.</td></tr>')
    return HTMLResponse(expand.rows(repo, ask, lines))


@page
async def compare(request: Request) -> Response:
    """The diff between two versions of a change (?from=N&to=M), drawn on the server."""
    repo, cid = request.path_params["repo"], request.path_params["change"]
    rec, st = await asyncio.gather(call(request, "change.get", {"change": cid}, repo=repo), call(request, "status", HEADER, repo=repo))
    timeline = await request.app.state.timelines.of(
        lambda start, limit: call(request, "log", {"from": start, "limit": limit}, repo=repo),
        repo, cid, rec.get("versions") or [rec["proposed_seq"]], st["next_seq"])
    commits = timeline.commits()
    try:
        old, new = int(request.query_params.get("from", "")), int(request.query_params.get("to", ""))
    except ValueError:
        old = new = 0
    if old not in commits or new not in commits:
        return render(request, "error.html", {"error": f"choose two versions of this change, 1 to {len(commits)} "
                                                       "(?from=N&to=M)", "repo": repo}, "_error.html", status=400)
    text, paths = await versions.compare(lambda m, p: call(request, m, p, repo=repo), request.app.state.trees,
                                         commits[old], commits[new])
    colours = views.coloured_now(text)
    if not colours:     # drawn plain now, coloured at the next drawing
        views.colour_later(text)
    return render(request, "compare.html", {"repo": repo, "rec": rec, "old": old, "new": new, "commits": commits,
                                            "paths": paths, "files": views.diff_tables(text, False, colours=colours)})


@page
async def queue(request: Request) -> Response:
    """The queue now (its head is being verified), recent integrations, the changes that stopped
    and why, and the day's plots; drawn again at every entry but a heartbeat."""
    repo = request.path_params["repo"]
    st, now_running = await asyncio.gather(call(request, "status", {"lists": ["changes"]}, repo=repo),
                                           call(request, "queue.running", repo=repo))
    stats = await request.app.state.queue_stats.of(
        lambda start, limit: call(request, "log", {"from": start, "limit": limit}, repo=repo), repo, st["next_seq"])
    by_id = {ch["change"]: ch for ch in st["changes"]}
    columns = {c: [] for c in QUEUE_COLUMNS}
    stopped = []
    for ch in sorted(st["changes"], key=lambda c: c["created_ms"], reverse=True):
        name = ch["status"]["status"]
        if name == "queued" and st["queue"][:1] == [ch["change"]]:
            name = "verifying"  # the worker integrates the head of the queue first
        elif name == "rejected" and any(r.startswith("verification_") for r in ch["status"].get("reasons", [])):
            name = "failed"
        if name in columns:
            columns[name].append(ch)
        if name in STOPPED:
            stopped.append({**ch, "stop": name})
    hours = queue_stats.hourly(stats, st["now_ms"])
    recent = [{"time_ms": t, "change": by_id.get(c) or {"change": c}, "commit": commit, "took": took}
              for t, c, commit, took in reversed(stats.integrations[-RECENT:])]
    return render(request, "queue.html", {
        "repo": repo, "st": st, "columns": columns, "stopped": stopped[:RECENT],
        "line": [{"change": by_id[c], "place": i + 1, "queued_ms": stats.queued_ms.get(c)} for i, c in enumerate(st["queue"]) if c in by_id],
        "recent": recent, "day": queue_stats.day_summary(stats, st["now_ms"]), "cut": stats.cut,
        "per_hour": plots.per_hour(hours), "latency": plots.proposal_to_integration(hours),
        "running": running.rounds(now_running), "now": now_running["now_ms"], "idle": 0,
        "poll": bool(now_running["rounds"] or st["queue"])}, "_queue.html")


@page
async def queue_running(request: Request) -> Response:
    """The queue page's running part alone, which polls itself each second while checks run (their
    output and elapsed times move without a log entry), and a few seconds more once they stop."""
    repo = request.path_params["repo"]
    now_running = await call(request, "queue.running", repo=repo)
    polls = whole(request.query_params.get("idle", ""), 0, running.IDLE_POLLS)
    idle = 0 if now_running["rounds"] else (running.IDLE_POLLS if polls is None else polls) + 1
    return render(request, "_running.html", {"repo": repo, "running": running.rounds(now_running), "now": now_running["now_ms"],
                                             "idle": idle, "poll": idle < running.IDLE_POLLS})


@page
async def sessions(request: Request) -> Response:
    repo = request.path_params["repo"]
    st = await call(request, "status", {"lists": ["sessions", "leases", "interests", "reservations"]}, repo=repo)
    live = sorted(st["sessions"], key=lambda x: (not x["active"], -(x.get("created_ms") or 0)))
    return render(request, "sessions.html", {"repo": repo, "st": st, "sessions": live}, "_sessions.html")


@page
async def forge(request: Request) -> Response:
    """Import from a remote, push trunk to one, back up, restore (console/forge.py): forms only,
    nothing here is drawn from the log but trunk."""
    repo = request.path_params["repo"]
    st = await call(request, "status", repo=repo)
    return render(request, "forge.html", {"repo": repo, "st": st})


EDITABLE_BYTES = 1024 * 1024  # a file edited in a textarea: text, and small enough to read there


@page
async def edit(request: Request) -> Response:
    """A small edit of one file of trunk, signed as a human's own change (human.prepare_change,
    then change.propose through human.submit: console/actions.py). The file is read at trunk;
    the form names that trunk as the change's base."""
    repo = request.path_params["repo"]
    path = request.query_params.get("path", "").strip()
    st = await call(request, "status", repo=repo)
    ctx = {"repo": repo, "st": st, "path": path, "text": "", "problem": None, "exists": False}
    if path:
        entries = await call(request, "tree", {"commit": st["trunk"], "with_content": False, "paths": [path]}, repo=repo)
        entry = next((e for e in entries if e["path"] == path), None)
        if entry is not None:
            ctx["exists"] = True
            if entry["mode"] not in ("regular", "executable") or entry["size"] > EDITABLE_BYTES:
                ctx["problem"] = "this file is no small text file: change it from a checkout (lonca propose)"
            else:
                got = await call(request, "blobs", {"commit": st["trunk"], "paths": [path]}, repo=repo)
                if got[0]["content_b64"] is None:
                    ctx["problem"] = "this file is redacted: its contents are not served (change it from a checkout)"
                data = base64.b64decode(got[0]["content_b64"] or "")
                try:
                    ctx["text"] = data.decode("utf-8")
                except UnicodeDecodeError:
                    pass
                if b"\0" in data or not ctx["text"] and data:  # what git would call binary
                    ctx["problem"] = "this file is not text: change it from a checkout (lonca propose)"
    return render(request, "edit.html", ctx)


@page
async def log(request: Request) -> Response:
    repo = request.path_params["repo"]
    op_filter = request.query_params.get("op", "").strip()
    actor_filter = request.query_params.get("actor", "").strip()
    st = await call(request, "status", HEADER, repo=repo)
    chain = await request.app.state.verification.catch_up(
        lambda m, p: call(request, m, p, repo=repo), repo, st["next_seq"])
    entries = await call(request, "log", {"from": max(1, st["next_seq"] - LOG_SHOWN), "limit": LOG_SHOWN}, repo=repo)
    rows = []
    for e in reversed(entries):
        en = e["entry"]
        label = views.actor_label(en["actor"])
        if (op_filter and en["op"].get("op") != op_filter) or (actor_filter and actor_filter not in label):
            continue
        rows.append({"e": en, "actor": label, "check": request.app.state.verification.status(chain, en["seq"])})
    ops = sorted({e["entry"]["op"].get("op") for e in entries})
    return render(request, "log.html", {"repo": repo, "rows": rows, "ops": ops, "op_filter": op_filter,
                                        "actor_filter": actor_filter, "st": st}, "_log.html")
