"""The console's writes: registering a key, and signing ceremonies (begin builds the operation and
the challenge, finish sends the assertion to the worker). Every one of them goes through `guard`."""
import base64
import json
import re
import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse

from lonca import humansig, webauthn
from lonca.audit import recovery_signed
from lonca.humansig import fingerprint
from lonca.client import Unreachable
from lonca.harness import HARNESSES
from lonca.protocol import LoncaError, now_ms, session_start_op

from . import ceremonies
from .enrolments import Refused
from . import forge
from .guard import HEADER, NotLoggedIn, Refusal, call, client_of, describe, guard, json_object, refuse, session_of, whole

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# what a passkey may be registered for besides an enrolment, and whether that needs a login
PURPOSES = {"human.rotate": True, "human.recovery_key": True, "human.recover": False}


def problem(message: str, status: int = 422) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def worker_problem(e: NotLoggedIn | LoncaError | Unreachable) -> JSONResponse:
    """A lost session, a worker's refusal or an unreachable worker, as a JSON problem."""
    if isinstance(e, NotLoggedIn):
        return problem("your session ended; log in again", 401)
    return problem(describe(e), 503 if isinstance(e, Unreachable) else 422)


async def serves_repositories(request: Request) -> bool:
    """Whether the worker serves a repository, which closes bootstrap (ping tells it; asking
    repo.prepare_init without a token would be a refusal on the security page each time)."""
    return not (await request.app.state.pool.call("ping"))["bootstrap"]


def _name(value, what: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise Refusal(f"{what} is letters, digits, '.', '_' and '-', at most 64")
    return value


def _text(value, what: str, limit: int = 4096) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.encode()) > limit:
        raise Refusal(f"say {what} (1 to {limit} bytes)")
    return value.strip()


def _seq(value) -> int:
    seq = whole(value, 1, 2**63 - 1)
    if seq is None:
        raise Refusal("target_seq is the sequence number of the pending entry")
    return seq


def _optional_text(value, what: str) -> str | None:
    """A field a form may leave empty: text, or nothing."""
    if value is not None and not isinstance(value, str):
        raise Refusal(f"{what} is text, or empty")
    return (value or "").strip() or None


# -- registration ---------------------------------------------------------------------------

async def register_begin(request: Request):
    s = await guard(request)
    body = await json_object(request)
    # a key for the operation named: the session's own name's (a rotation's new key, a recovery
    # key), or, with no session, the new key a recovery key is to sign over
    purpose = body.get("purpose") or None
    if purpose is not None and (not isinstance(purpose, str) or purpose not in PURPOSES):
        return problem(f"no registration for {str(purpose)[:40]!r}")
    if purpose is not None and PURPOSES[purpose] != s.logged_in:
        return problem("log in first" if PURPOSES[purpose] else "log out first: a recovery is for a key that is lost")
    try:
        human = s.human if purpose and s.logged_in else _name(body.get("human"), "your name")
    except Refusal as e:
        return problem(str(e))
    options, challenge = ceremonies.registration_options(request.app.state.settings, human, own_user_id=bool(purpose))
    s.registration = {"challenge": challenge, "human": human, "own": (bool(body.get("own")) or bool(purpose)) and s.logged_in,
                      "purpose": purpose}
    return JSONResponse({"ok": True, "options": options})


async def register_finish(request: Request):
    s = await guard(request)
    body = await json_object(request)
    pending, s.registration = s.registration, None
    if pending is None:
        return problem("no registration was begun in this browser session; start again")
    settings = request.app.state.settings
    try:
        key = webauthn.key_from_registration(json.dumps(body.get("credential")), pending["challenge"],
                                             settings.rp_id, settings.origin, require_uv=False)
    except Exception as e:
        return problem(f"the key was not registered: {e}")
    if pending["purpose"] == "human.recover":
        s.new_key = {"human": pending["human"], "key": key, "purpose": pending["purpose"]}
        return JSONResponse({"ok": True, "message": f"New passkey registered for {pending['human']} (fingerprint "
                                                    f"{fingerprint(key)}); now sign its recovery with your recovery key (2.)."})
    if s.logged_in and pending.get("own"):
        # a further passkey of the human logged in here, enrolled next by their own signed
        # human.enroll (the "enrol-own" step of static/webauthn.js), not a request others see
        s.new_key = {"human": pending["human"], "key": key, "purpose": pending["purpose"]}
        then = {"human.rotate": "now sign the rotation", "human.recovery_key": "now sign it as your recovery key"}.get(
            pending["purpose"], "now sign its enrolment")
        return JSONResponse({"ok": True, "next": "enrol-own", "message": f"Passkey registered for {pending['human']}; "
                                                                         f"{then} with the key you are logged in with."})
    try:
        bootstrap = not await serves_repositories(request)
    except Unreachable as e:
        return problem(describe(e), 503)
    if bootstrap:
        s.new_key = {"human": pending["human"], "key": key}
        request.app.state.sessions.rotate(s)  # this session now holds a key: a new id
        return JSONResponse({"ok": True, "next": "bootstrap", "csrf": s.csrf,
                             "message": f"Key registered for {pending['human']}. Now create the first repository with it."})
    enrolments = request.app.state.enrolments
    r = enrolments.waiting(pending["human"], key)
    if r is None:  # a retry of a waiting request is that request: it spends no quota
        why = request.app.state.enrolment_limit.allow(client_of(request))
        if why:
            refuse(request, "rate_limited", 429, f"too many enrolment requests: {why}")
        try:
            r = enrolments.add(pending["human"], key, client_of(request))
        except Refused as e:
            refuse(request, "enrolment_refused", 429, str(e))
    return JSONResponse({"ok": True, "next": "wait", "message":
                         f"Key registered for {r.human}. An enrolled human enrols you from Repositories; "
                         f"check with them that the fingerprint is {r.fingerprint}. Then log in."})


async def decline_enrolment(request: Request):
    """An enrolled human turns a request down (a name squatted, a key nobody knows)."""
    s = await guard(request)
    if not s.logged_in:
        return RedirectResponse("/login", status_code=303)
    r = request.app.state.enrolments.remove(str((await request.form()).get("request") or ""))
    if r is not None:
        request.app.state.console_events.add("enrolment_declined", request.url.path, client_of(request),
                                             f"{s.human} declined the request of {r.human} (fingerprint {r.fingerprint})")
    return RedirectResponse("/repos", status_code=303)


# -- signing ceremonies ----------------------------------------------------------------------

async def _profile(request: Request, repo: str) -> str:
    return (await call(request, "status", HEADER, repo=repo))["profile"]


async def _begin_login(request, s, body):
    human = _name(body.get("human"), "your name")
    return ceremonies.for_login(human, request.app.state.settings.login_ttl_ms), False, None


async def _own_key(request: Request, s) -> dict:
    """The key this browser session logged in with, as enrolled (whoami names only its public
    part; a repository it is enrolled in has the whole key)."""
    me = await call(request, "whoami")
    for repo in me["repos"]:
        key = (await call(request, "status", HEADER, repo=repo))["humans"].get(s.human)
        if key and key["public"] == me["key"]:
            return {"alg": key["alg"], "public": key["public"]}     # status adds its recovery key
    raise Refusal("your key is enrolled in no repository any more; log in again")


async def _begin_init(request, s, body):
    """The first repository (bootstrap: the key just registered) or a further one (logged in:
    the key of the session, whose token the worker's `bootstrap` credential then needs)."""
    if s.logged_in:
        human, key = s.human, await _own_key(request, s)
    elif s.new_key:
        human, key = s.new_key["human"], s.new_key["key"]
    else:
        raise Refusal("register a key first (Enrol)")
    repo = _name(body.get("repo"), "the repository's name")
    import_from = _optional_text(body.get("import_from"), "the source")
    branch = _optional_text(body.get("branch"), "the branch")
    profile = body.get("profile") or None
    if profile not in (None, "cooperative", "hardened"):
        raise Refusal("the profile is cooperative or hardened")
    prepared = await request.app.state.pool.call("repo.prepare_init", {
        "repo": repo, "human": human, "human_key": key, "import_from": import_from, "branch": branch,
        "profile": profile}, token=s.token if s.logged_in else None)
    source = f" from {import_from}" + (f" (branch {prepared['branch']})" if prepared.get("branch") else "") if import_from else ""
    c = ceremonies.for_op("repo.init", repo, human, prepared["op"],
                          f"create repository {repo}{source} at {prepared['op']['trunk'][:12]}, profile {prepared['profile']}")
    return c, prepared["profile"] == "hardened", webauthn.credential(key).credential_id


async def _op_approve(body, request, repo):
    checks = sorted({c.strip() for c in str(body.get("checks") or "").split(",") if c.strip()})
    op = {"op": "approve", "target_seq": _seq(body.get("target_seq")), "note": str(body.get("note") or "").strip()}
    if checks:
        op["checks"] = checks
    return op, f"approve entry {op['target_seq']}" + (f" with checks {', '.join(checks)}" if checks else "")


async def _op_reject(body, request, repo):
    op = {"op": "reject", "target_seq": _seq(body.get("target_seq")), "reason": _text(body.get("reason"), "why you reject it")}
    return op, f"reject entry {op['target_seq']}: {op['reason']}"


async def _op_comment(body, request, repo):
    """A comment on a file of the pending version, on one of its lines or symbols, perhaps asking
    for changes; the worker checks that the file is one the change touches."""
    line = body.get("line")
    line = None if line is None or isinstance(line, str) and not line.strip() else line
    if line is not None and whole(line, 1, 10_000_000) is None:
        raise Refusal("the line is a line number of this version (1 or more), or empty")
    path = body.get("path")
    if not isinstance(path, str) or not path:
        raise Refusal("choose the file the comment is on")
    symbol = str(body.get("symbol") or "").strip() or None
    op = {"op": "comment", "target_seq": _seq(body.get("target_seq")), "path": path, "line": whole(line, 1, 10_000_000),
          "symbol": symbol, "text": _text(body.get("text"), "your comment"), "request_changes": bool(body.get("request_changes"))}
    where = path + (f" line {op['line']}" if op["line"] else "") + (f" ({symbol})" if symbol else "")
    return op, f"{'request changes' if op['request_changes'] else 'comment'} on entry {op['target_seq']} at {where}"


async def _op_freeze(body, request, repo):
    op = {"op": body["kind"], "reason": _text(body.get("reason"), f"why you {body['kind']} it")}
    return op, f"{body['kind']} the repository: {op['reason']}"


async def _op_redact(body, request, repo):
    blob = str(body.get("blob") or "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{40}", blob):
        raise Refusal("the blob's git id is 40 hex digits (a file's blob, as the tree lists it)")
    op = {"op": "redact", "blob": blob, "reason": _text(body.get("reason"), "why you redact it")}
    return op, f"redact blob {blob[:12]}: {op['reason']}"


async def _op_session(body, request, repo):
    agent = _name(body.get("agent"), "the agent's name")
    hours = whole(body.get("hours") or 8, 1, 168)
    if hours is None:
        raise Refusal("a session lasts 1 to 168 hours (a whole number)")
    paths = [p.strip() for p in str(body.get("paths") or "**").split(",") if p.strip()] or ["**"]
    op = session_start_op(f"{agent}-{secrets.token_hex(4)}", agent, now_ms() + hours * 3600_000, paths,
                          task=str(body.get("task") or "").strip() or None)
    name = body.get("harness") or None
    if name is not None and (not isinstance(name, str) or name not in HARNESSES):
        raise Refusal(f"the harness is one of {', '.join(HARNESSES)}, or none")
    if name:
        op["harness"] = name    # signed: the level of its hooks is read for this harness only
    return op, f"start a session for {agent} on {', '.join(paths)} for {hours} h" + (f" in {name}" if name else "")


async def _op_priority(body, request, repo):
    """A queued change goes ahead of the changes queued before it that it is independent of."""
    change = body.get("change")
    if not isinstance(change, str) or not re.fullmatch(r"[k-z]{32}", change):
        raise Refusal("name the change to put first")
    return {"op": "priority", "change": change}, f"put change {change[:12]} ahead of the queue"


async def _op_end_session(body, request, repo):
    """cap.revoke: an agent session (and the capabilities it handed on) ends at this entry; its
    token stops working (a leaked token is cut off here)."""
    op = {"op": "cap.revoke", "session": _name(body.get("session"), "the session"),
          "reason": _text(body.get("reason"), "why you end it")}
    return op, f"end session {op['session']}: {op['reason']}"


async def _op_enroll(body, request, repo):
    """A key the logged-in human brings (a file key for the CLI, pasted as `lonca human key`
    prints it, or a passkey just registered in this browser), or a waiting enrolment request."""
    s = session_of(request)
    if body.get("own"):
        if not s.new_key or s.new_key.get("purpose"):
            raise Refusal("register the passkey first (it was not, or this page is old)")
        human, key = s.new_key["human"], s.new_key["key"]
        return {"op": "human.enroll", "human": human, "key": key}, f"enrol your passkey as {human} in {repo} (key {fingerprint(key)})"
    if "public" in body:
        human = _name(body.get("human"), "the name the key signs as")
        key = humansig.file_key_from_text(str(body.get("public") or ""))
        if key is None:
            raise Refusal("paste the line `lonca human key` printed: ed25519: and 64 hex digits")
        return {"op": "human.enroll", "human": human, "key": key}, f"enrol the file key of {human} in {repo} (fingerprint {fingerprint(key)})"
    r = request.app.state.enrolments.get(str(body.get("request") or ""))
    if r is None:
        raise Refusal("that enrolment request is gone (requests last a day); ask them to register again")
    return {"op": "human.enroll", "human": r.human, "key": r.key}, f"enrol {r.human} (key {r.fingerprint})"


async def _op_revoke(body, request, repo):
    """Revoke a human's key (the security page offers it for a cloned authenticator)."""
    human = _name(body.get("human"), "the human whose key to revoke")
    op = {"op": "human.revoke", "human": human, "reason": _text(body.get("reason"), "why you revoke the key")}
    return op, f"revoke the key of {human} in {repo}: {op['reason']}"


async def _op_rotate(body, request, repo):
    """human.rotate: the passkey just registered in this browser replaces the key of this
    session in one repository, signed by the old key; the worker ends every session of the old
    key, this one included (seed, human.login)."""
    s = session_of(request)
    new = s.new_key
    if not new or new.get("purpose") != "human.rotate":
        raise Refusal("register the new passkey first (it was not, or this page is old)")
    return ({"op": "human.rotate", "human": s.human, "key": new["key"]},
            f"replace your key in {repo} with the new passkey (fingerprint {fingerprint(new['key'])})")


async def _op_recovery_key(body, request, repo):
    """human.recovery_key: a security key just registered in this browser (kept offline, it
    signs a recovery on /recover), or the public part of a file key made where the console never
    sees it (`lonca human key`; it signs `lonca human recover`). Either way the private key is in
    the device or the file only: nothing secret is made on this server."""
    s = session_of(request)
    if "public" in body:
        key = humansig.file_key_from_text(str(body.get("public") or ""))
        if key is None:
            raise Refusal("paste the line `lonca human key` printed: ed25519: and 64 hex digits")
    elif s.new_key and s.new_key.get("purpose") == "human.recovery_key":
        key = s.new_key["key"]
    else:
        raise Refusal("register the recovery key first (it was not, or this page is old)")
    return ({"op": "human.recovery_key", "human": s.human, "key": key},
            f"set the recovery key of {s.human} in {repo} (fingerprint {fingerprint(key)})")


async def _op_daemon_rotate(body, request, repo):
    """daemon.rotate to the next key daemon.prepare_rotate makes (or keeps, until every
    repository moved); the worker refuses a repository on that key already."""
    key = (await call(request, "daemon.prepare_rotate"))["key"]
    return {"op": "daemon.rotate", "key": key}, f"move the log of {repo} to the worker's next daemon key {key[:16]}…"


async def _op_daemon_recover(body, request, repo):
    """daemon.recover of a restored (foreign) log, to the daemon key this worker signs with."""
    key = (await request.app.state.pool.call("ping"))["daemon_key"]
    return ({"op": "daemon.recover", "key": key},
            f"adopt the restored log of {repo} with this worker's daemon key {key[:16]}…")


async def _begin_recover(request, s, body):
    """With no session: the passkey just registered in this browser becomes the name's key,
    signed by the name's recovery key (human.recover), which the browser asks for among the
    keys it can reach. For a restored repository that waits for daemon.recover, the same
    signature adopts its log too (daemon.recover with recover, log format 27)."""
    new = s.new_key
    if not new or new.get("purpose") != "human.recover":
        raise Refusal("register the new passkey first (1.)")
    repo, human = _name(body.get("repo"), "the repository"), new["human"]
    op: dict = {"op": "human.recover", "human": human, "key": new["key"]}
    summary = f"recover {human} in {repo} with the new passkey (fingerprint {fingerprint(new['key'])})"
    if body.get("daemon"):
        key = (await request.app.state.pool.call("ping"))["daemon_key"]
        op = {"op": "daemon.recover", "key": key, "recover": {"human": human, "key": new["key"]}}
        summary = f"adopt the restored log of {repo} with this worker's daemon key {key[:16]}… and {summary}"
    # the profile is not readable without a session: user verification as the key prefers (the
    # worker requires it of a hardened repository's signatures, and says so)
    return ceremonies.for_op(op["op"], repo, human, op, summary), False, None


async def _op_policy(body, request, repo):
    """The policy commit is written by the worker first; the human signs the op naming it."""
    config = _text(body.get("config"), "the new lonca.toml", limit=64 * 1024) + "\n"
    params = {"config": config}
    if isinstance(body.get("cedar"), str):  # the form's policy.cedar, empty included (then nothing is decided)
        params["policy"] = body["cedar"].strip() + "\n" if body["cedar"].strip() else ""
    op = (await call(request, "human.prepare_policy", params, repo=repo))["op"]
    return op, f"put policy {op['policy'][:12]} in force in {repo}"


async def _op_change(body, request, repo):
    """A human's own change of one file (the edit page): the worker builds the commit on the
    trunk the page showed and computes its facts (human.prepare_change); the human signs the
    change.propose it answers, unchanged. A textarea's line ends are LF here."""
    path = body.get("path")
    if not isinstance(path, str) or not path.strip():
        raise Refusal("name the file to change")
    content = body.get("content")
    if not isinstance(content, str):
        raise Refusal("the file's new text is missing")
    data = content.replace("\r\n", "\n").encode()
    intent = _text(body.get("intent"), "what the change does and why")
    s = session_of(request)
    prepared = await call(request, "human.prepare_change", {
        "base": str(body.get("base") or ""), "files": [{"path": path.strip(), "content_b64": base64.b64encode(data).decode(),
                                                         "mode": None}],
        "change": None, "author": s.human, "intent": intent, "revert_of": None}, repo=repo)
    op = prepared["op"]
    notes = f" (note: {'; '.join(prepared['syntax_errors'])})" if prepared["syntax_errors"] else ""
    return op, f"propose change {op['change'][:12]} to {path.strip()} on {op['base'][:12]}: {intent}{notes}"


OPS = {"change.propose": _op_change, "policy.update": _op_policy, "approve": _op_approve, "reject": _op_reject, "comment": _op_comment,
       "freeze": _op_freeze, "unfreeze": _op_freeze, "redact": _op_redact, "session.start": _op_session, "cap.revoke": _op_end_session,
       "priority": _op_priority,
       "human.enroll": _op_enroll,
       "human.revoke": _op_revoke, "human.rotate": _op_rotate, "human.recovery_key": _op_recovery_key,
       "daemon.rotate": _op_daemon_rotate, "daemon.recover": _op_daemon_recover,
       "import.external": forge.op_import, "bridge.push": forge.op_push}
STEP_UP = ("repo.backup", "repo.restore")  # no operation of the log: signed as a login of their own (console/forge.py)


async def ceremony_begin(request: Request):
    s = await guard(request)
    body = await json_object(request)
    kind = body.get("kind")
    if not isinstance(kind, str):
        return problem("say which ceremony: kind is its name (login, approve, ...)")
    try:
        if kind == "login":
            c, uv, credential_id = await _begin_login(request, s, body)
        elif kind == "repo.init":
            c, uv, credential_id = await _begin_init(request, s, body)
        elif kind == "human.recover":
            c, uv, credential_id = await _begin_recover(request, s, body)
        elif kind in OPS:
            if not s.logged_in:
                return problem("log in first", 401)
            repo = _name(body.get("repo"), "the repository")
            op, summary = await OPS[kind](body, request, repo)
            c = ceremonies.for_op(kind, repo, s.human, op, summary)
            uv, credential_id = await _profile(request, repo) == "hardened", s.credential_id
        elif kind in STEP_UP:
            if not s.logged_in:
                return problem("log in first", 401)
            repo = _name(body.get("repo"), "the repository")
            c = forge.step_up(kind, repo, s.human, body)
            # a restore's repository is not here yet: no profile to read, verification as the key prefers
            uv = kind == "repo.backup" and await _profile(request, repo) == "hardened"
            credential_id = s.credential_id
        else:
            return problem(f"no ceremony {kind!r}")
    except Refusal as e:
        return problem(str(e))
    except (NotLoggedIn, LoncaError, Unreachable) as e:
        return worker_problem(e)
    s.add_ceremony(c)
    options = ceremonies.request_options(request.app.state.settings, c, credential_id, uv)
    return JSONResponse({"ok": True, "ceremony": c.id, "options": options, "summary": c.summary})


async def ceremony_finish(request: Request):
    s = await guard(request)
    body = await json_object(request)
    # Not consumed here: the worker refuses a second use of the nonce (nonce_reused), so a replay
    # is refused where it matters and the browser is told why.
    c = s.ceremonies.get(body.get("ceremony")) if isinstance(body.get("ceremony"), str) else None
    if c is None:
        return problem("this signing request is unknown or old; start again")
    credential = body.get("credential")
    try:
        sig = ceremonies.human_signature(c, credential)
    except ValueError as e:
        return problem(str(e))
    pool = request.app.state.pool
    elsewhere: list[str] = []
    try:
        if c.kind == "login":
            res = await pool.call("human.login", {"sig": sig, "ttl_ms": c.ttl_ms})
            request.app.state.sessions.log_in(s, res["human"], res["token"], res["expires_ms"], credential.get("id"))
            return JSONResponse({"ok": True, "message": f"logged in as {res['human']}", "redirect": "/"})
        if c.kind == "repo.init" and s.logged_in:
            res = await call(request, "repo.init", {"op": c.op, "sig": sig})
            return JSONResponse({"ok": True, "message": f"{c.summary}: created (seq {res['seq']})",
                                 "redirect": f"/r/{c.repo}/review"})
        if c.kind == "repo.init":
            res = await pool.call("repo.init", {"op": c.op, "sig": sig})
            s.new_key = None
            request.app.state.sessions.rotate(s)
            return JSONResponse({"ok": True, "message": f"created {c.repo} (seq {res['seq']}); log in with the same key",
                                 "redirect": f"/login?human={c.human}"})
        if c.kind in STEP_UP:
            return JSONResponse({"ok": True, **await forge.run_step_up(request, c, sig)})
        if recovery_signed(c.op):  # the recovery key's signature is the credential: no token
            return JSONResponse(_recovered(s, c, await pool.call("human.submit", {"op": c.op, "sig": sig}, repo=c.repo)))
        if c.kind == "human.rotate":  # asked while the old key's session still reads
            elsewhere = [r for r in await call(request, "repo.list") if r != c.repo]
        res = await call(request, "human.submit", {"op": c.op, "sig": sig}, repo=c.repo)
    except (NotLoggedIn, LoncaError, Unreachable) as e:
        return worker_problem(e)
    if c.kind == "human.rotate" and res["decision"]["outcome"] == "allow":
        return JSONResponse(_rotated(request, c, res, elsewhere))
    if c.kind == "human.enroll" and s.new_key and s.new_key["key"] == c.op["key"]:
        s.new_key = None    # one passkey, one enrolment: another repository takes another registration
    if c.kind == "human.enroll" and res["decision"]["outcome"] == "allow":
        for r in request.app.state.enrolments.all():
            if r.human == c.op["human"] and r.key == c.op["key"]:
                request.app.state.enrolments.remove(r.id)
    out = {"ok": True, "seq": res["seq"], "outcome": res["decision"]["outcome"],
           "message": f"{c.summary}: {res['decision']['outcome']} (seq {res['seq']})"
                      + (f" — {', '.join(res['decision']['reasons'])}" if res["decision"]["reasons"] else "")}
    if c.kind == "change.propose":
        out["change"] = c.op["change"]
        out["status"] = res["status"]
    if c.kind == "bridge.push" and "push" in res:
        out["push"] = res["push"]  # git's porcelain output, shown under the result
    if c.kind == "session.start" and "token" in res:
        out["agent_token"] = res["token"]  # shown once to the human who started it, never logged
        # where it goes: `session join` reads it from stdin (never a command line) into the workspace
        out["join"] = f"lonca session join --dir {c.repo}-{c.op['session']}"
    return JSONResponse(out)


def _rotated(request: Request, c, res: dict, elsewhere: list[str]) -> dict:
    """The worker ended every session of the old key, this browser's with them: the browser
    session ends too, and the human logs in with the new passkey."""
    s = session_of(request)
    s.new_key = None
    request.app.state.sessions.end(s)
    still = (f" The old key still signs in {', '.join(elsewhere)}: log in with it and replace it there too."
             if elsewhere else "")
    return {"ok": True, "seq": res["seq"], "outcome": res["decision"]["outcome"], "csrf": s.csrf,
            "login": f"/login?human={c.human}",
            "message": f"{c.summary}: {res['decision']['outcome']} (seq {res['seq']}); {res['sessions_ended']} "
                       f"session(s) of the old key ended, this one too: log in with the new passkey.{still}"}


def _recovered(s, c, res: dict) -> dict:
    outcome = res["decision"]["outcome"]
    out = {"ok": True, "seq": res["seq"], "outcome": outcome,
           "message": f"{c.summary}: {outcome} (seq {res['seq']})" + (f" — {', '.join(res['decision']['reasons'])}"
                                                                      if res["decision"]["reasons"] else "")}
    if outcome == "allow":
        s.new_key = None  # one registration, one recovery
        out["login"] = f"/login?human={c.human}"
        out["message"] += (f"; {res['sessions_ended']} session(s) of the lost key ended. The recovery key is spent: "
                           "log in with the new passkey and set a new one (Keys).")
    return out


async def logout(request: Request):
    s = await guard(request)
    if s.logged_in:
        try:
            await request.app.state.pool.call("human.logout", token=s.token)
        except (LoncaError, Unreachable):
            pass  # the session is gone from the browser either way; the worker's expires on its own
    request.app.state.sessions.end(s)
    return RedirectResponse("/login", status_code=303)
