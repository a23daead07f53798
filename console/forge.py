"""The forge page's writes: import from a remote, push trunk to one, back the repository up and
restore one from a backup (docs/decisions.md, "The forge in the console").

Import and push are operations of the log: the worker prepares them (human.prepare_import,
human.prepare_push), the human signs them with the key, human.submit logs and runs them, as every
other write of the console. Backup and restore write nothing to the log (a backup reads it, a
restore brings back a log that is signed already), so the seed gives them no operation to sign;
the console still asks the key for each one: a login assertion of its own (scoped to the
repository for a backup), which the worker verifies as any login, presence included, and whose
short-lived token makes that one call and is ended."""
import secrets

from starlette.requests import Request

from lonca import humansig
from lonca.protocol import now_ms

from .browser_sessions import Ceremony
from .guard import Refusal, call

STEP_UP_TTL_MS = 60_000  # the token of a backup's or restore's own login: one call, then ended


def _remote(body: dict) -> str:
    remote = str(body.get("remote") or "").strip()
    if not remote or len(remote) > 4096:
        raise Refusal("say which remote: an absolute path, https://, ssh:// or user@host:path")
    return remote


async def op_import(body: dict, request: Request, repo: str) -> tuple[dict, str]:
    """human.prepare_import fetches the branch (up_to_date, not_fast_forward and git are its refusals)."""
    remote, branch = _remote(body), str(body.get("branch") or "").strip() or None
    op = (await call(request, "human.prepare_import", {"remote": remote, "branch": branch}, repo=repo))["op"]
    return op, f"import {op['commit'][:12]} from {remote}" + (f" (branch {branch})" if branch else "") + f" into {repo}"


async def op_push(body: dict, request: Request, repo: str) -> tuple[dict, str]:
    remote = _remote(body)
    op = (await call(request, "human.prepare_push", {"remote": remote}, repo=repo))["op"]
    return op, f"push trunk of {repo} to {remote}"


def step_up(kind: str, repo: str, human: str, body: dict) -> Ceremony:
    """The login ceremony a backup or a restore is asked under; what it will do rides in `op`
    (the console's own record, never sent as an operation)."""
    if kind == "repo.backup":
        scope, what, summary = repo, {}, f"back up {repo}"
    else:
        target, source = str(body.get("repo") or "").strip(), _remote({"remote": body.get("from")})
        if not target:
            raise Refusal("say the name of the repository to restore (the backup's own name)")
        scope, what, summary = None, {"repo": target, "from": source}, f"restore {target} from {source}"
    nonce, issued = secrets.token_hex(16), now_ms()
    return Ceremony(id=secrets.token_urlsafe(16), kind=kind, repo=scope, human=human, nonce=nonce, issued_ms=issued,
                    message=humansig.login_bytes(scope, human, STEP_UP_TTL_MS, nonce, issued), op=what,
                    ttl_ms=STEP_UP_TTL_MS, summary=summary)


async def run_step_up(request: Request, c: Ceremony, sig: dict) -> dict:
    """The login the key just signed, then the one call it was for, then that login ended."""
    pool = request.app.state.pool
    res = await pool.call("human.login", {"sig": sig, "ttl_ms": c.ttl_ms}, repo=c.repo)
    try:
        if c.kind == "repo.backup":
            out = await pool.call("repo.backup", {}, repo=c.repo, token=res["token"])
            return {"message": f"{c.summary}: written to {out['path']} (log up to seq {out['seq']})", "path": out["path"]}
        assert c.op is not None
        out = await pool.call("repo.restore", c.op, token=res["token"])
        return {"message": f"{c.summary}: restored, log verified up to seq {out['seq']}"
                           + (" (on another daemon key: it waits for daemon.recover; adopt it on Repositories)"
                              if out["foreign"] else "")}
    finally:
        await pool.call("human.logout", token=res["token"])
