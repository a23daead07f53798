"""Human sessions and signed operations: repo.prepare_init, repo.init, human.login,
human.logout, human.submit."""
import asyncio
from pathlib import Path
import re
import secrets
import shutil

from lonca import humansig, webauthn
from lonca.canonical import content_hash
from lonca.protocol import LOGIN_TTL_DEFAULT_MS, LOGIN_TTL_MAX_MS, LoncaError

from . import gitstore, presence, signatures
from .auth import new_human_token, token_hash
from .log import Draft, allow
from .policy import load as load_policy
from .methods import Call, method
from .review_methods import decide_approve, decide_policy_update, decide_priority, decide_reject
from .session_methods import decide_session_start
from .store import NonceRow, PreparedRow, TokenRow

KEY_ALGS = {"ed25519": 64, "webauthn-ed25519": None, "webauthn-es256": None}
REMOTE_RE = re.compile(r"^(https://|ssh://|[^/@\s]+@[^:\s]+:)")


def check_key(key) -> dict:
    if not isinstance(key, dict) or key.get("alg") not in KEY_ALGS or not isinstance(key.get("public"), str):
        raise LoncaError("invalid", 'a human key is {"alg": "ed25519", "public": lowercase hex}')
    if not re.fullmatch(r"[0-9a-f]+", key["public"]) or (KEY_ALGS[key["alg"]] and len(key["public"]) != KEY_ALGS[key["alg"]]):
        raise LoncaError("invalid", "the human key's public part must be lowercase hex of the right length")
    if key["alg"] == "ed25519" and (why := humansig.ed25519_key_problem(bytes.fromhex(key["public"]))):
        raise LoncaError("invalid", why)
    if key["alg"] in webauthn.KEY_ALGS:
        webauthn.credential(key)  # refuses a WebAuthn key that could never verify (or of small order)
    return {"alg": key["alg"], "public": key["public"]}


def _check_remote(call: Call, source: str) -> None:
    home = call.ctx.config.home.resolve()
    if source.startswith("/"):
        p = Path(source).resolve()
        if p == home or home in p.parents:
            raise LoncaError("forbidden", "import_from may not name a path inside the daemon's home")
        if not p.exists():
            raise LoncaError("git", f"{source} does not exist")
    elif not REMOTE_RE.match(source):
        raise LoncaError("invalid", "import_from is an absolute path, https://, ssh:// or user@host:path")


@method("repo.prepare_init", "bootstrap")
async def prepare_init(call: Call) -> dict:
    p = call.params
    d = call.ctx
    name, human, key = p["repo"], p["human"], check_key(p["human_key"])
    source, branch = p.get("import_from"), p.get("branch")
    profile = p.get("profile") or "cooperative"
    without_presence = p.get("without_presence", False)
    if without_presence and profile != "hardened":
        raise LoncaError("invalid", "without_presence goes with the hardened profile only")
    if profile == "hardened" and key["alg"] == "ed25519" and not without_presence:
        raise LoncaError("invalid", "presence_required: the hardened profile needs a key that proves presence (or without_presence)")
    if d.state.repo(name):
        raise LoncaError("conflict", f"the repository {name} exists")
    staging = d.config.repos_dir / ".staging" / secrets.token_hex(8)
    staging.parent.mkdir(parents=True, exist_ok=True)
    if source:
        _check_remote(call, source)
        trunk, branch = await asyncio.to_thread(gitstore.import_branch, staging, source, branch)
    else:
        trunk = await asyncio.to_thread(gitstore.create_empty, staging, d.now_ms())

    def read_staged() -> tuple[list[dict], str | None]:
        store = gitstore.open_store(staging)  # opened on the thread that reads it
        return gitstore.list_tree(store, trunk), gitstore.policy_text(store, trunk)
    files, text = await asyncio.to_thread(read_staged)
    imported = load_policy(text)
    page = d.config.limits.page_b64
    large = [{"path": f["path"], "size": f["size"]} for f in files if gitstore.b64_size(f["size"]) > page]
    tree_bytes = sum(f["size"] for f in files)
    warnings = [f"{f['path']} ({f['size']} bytes) is above the change cap" for f in large]
    if sum(gitstore.b64_size(f["size"]) for f in files) > page:
        warnings.append("the tree is above one page: fetch it with tree and blobs in pages")
    if imported.problem:
        warnings.append(f"{imported.problem}; the defaults hold until a human sends policy.update "
                        "(human.prepare_policy, docs/policy.md)")
    op = {"op": "repo.init", "repo": name, "daemon_key": d.public_key, "human": human, "human_key": key,
          "policy": trunk, "trunk": trunk, "profile": profile}
    row = PreparedRow(op_hash=content_hash(op), kind="repo.init", staging=str(staging), created_ms=d.now_ms())
    await d.db_write([row])
    # branch: what was imported (the source's default branch when none was named), for the human to check
    return {"op": op, "warnings": warnings, "large_files": large, "tree_bytes": tree_bytes, "profile": profile,
            "branch": branch}


@method("repo.init", "bootstrap", writes=True)
async def repo_init(call: Call) -> dict:
    p = call.params
    d = call.ctx
    op = p["op"]
    sig = signatures.check_shape(p["sig"], "denied")
    prepared = await d.db_get(PreparedRow, content_hash(op))
    if prepared is None:
        raise LoncaError("invalid", "this repo.init was not prepared by this daemon; call repo.prepare_init and sign its op unchanged")
    if sig["human"] != op["human"]:
        raise LoncaError("denied", "bad_human_signature: repo.init is signed by the human it enrols")
    if call.auth and call.auth.human != op["human"]:
        raise LoncaError("forbidden", "the signer must be the human of this session")
    name = op["repo"]
    target = d.config.store_path(name)

    def put_back() -> None:
        """The commit failed and the log does not hold this repo.init: its store goes back to
        the staging, so that the same signed op can be sent again."""
        if d.state.repo(name) is None and target.exists():
            shutil.move(target, prepared.staging)

    def decide() -> Draft:
        if d.state.repo(name):
            raise LoncaError("conflict", f"the repository {name} exists")
        signatures.check_op(d.state, name, op, sig, op["human_key"], d.now_ms())
        if target.exists():
            shutil.rmtree(target)
        # in place before the commit: the state applied with the entry reads its policy there
        shutil.move(prepared.staging, target)
        return Draft(actor={"kind": "human", "name": op["human"]}, op=op, decision=allow(), human=sig,
                     after_failed_commit=[put_back])

    return await d.log.append(name, decide)


@method("human.login", "login")
async def login(call: Call) -> dict:
    p = call.params
    d = call.ctx
    ttl = p.get("ttl_ms")
    ttl = LOGIN_TTL_DEFAULT_MS if ttl is None else ttl
    if not 0 < ttl <= LOGIN_TTL_MAX_MS:
        raise LoncaError("invalid", f"ttl_ms is between 1 and {LOGIN_TTL_MAX_MS}")
    sig = signatures.check_shape(p["sig"], "unauthenticated")
    human = sig["human"]
    message = humansig.login_bytes(call.repo, human, ttl, sig["nonce"], sig["issued_ms"])
    candidates = [d.state.repo(call.repo)] if call.repo else list(d.state.repos.values())
    key = next((rs.humans[human] for rs in candidates if rs and human in rs.humans
                and humansig.verify(rs.humans[human], message, sig["sig"])), None)
    if key is None:
        why = presence.login_refusal([rs.humans[human] for rs in candidates if rs and human in rs.humans], message, sig["sig"])
        raise LoncaError("unauthenticated", why or "bad_human_signature: no enrolled key of this human verifies the login")
    now = d.now_ms()
    signatures.check_fresh(d.state, sig, now, "unauthenticated")
    presence.check_count(d.state.sign_counts, key, sig["sig"], "unauthenticated")
    nonce_until = d.state.note_signature(sig, key)
    token = new_human_token()
    expires = now + ttl
    row = TokenRow(token_hash=token_hash(token), kind="human", human=human, key_alg=key["alg"],
                   key_public=key["public"], expires_ms=expires)
    await d.db_write([row, NonceRow(nonce=sig["nonce"], human=human, expires_ms=nonce_until)])
    d.tokens.add(row)
    return {"token": token, "human": human, "expires_ms": expires}


@method("human.logout", "public")
async def logout(call: Call) -> dict:
    d = call.ctx
    if call.token is None:
        raise LoncaError("unauthenticated", "human.logout ends the session of the token it carries; send one")
    row = d.tokens.lookup(call.token)
    if row is None or row.ended:
        raise LoncaError("unauthenticated", "the token is unknown or ended")
    if row.kind != "human":
        raise LoncaError("forbidden", "human.logout ends human sessions; an agent ends its session with session.end")
    row.ended = True
    await d.db_write([row])
    return {"ended": True}


# Operation kinds human.submit takes, each decided by its own function (later issues add more).
SUBMIT_OPS = {"session.start": decide_session_start, "approve": decide_approve, "reject": decide_reject,
              "policy.update": decide_policy_update, "priority": decide_priority}


@method("human.submit", "human", writes=True)
async def submit(call: Call) -> dict:
    p = call.params
    d = call.ctx
    rs = call.repo_state()
    op = p["op"]
    sig = signatures.check_shape(p["sig"], "denied")
    if sig["human"] != call.auth.human:
        raise LoncaError("forbidden", "the signer must be the human of this session")
    decide_op = SUBMIT_OPS.get(op.get("op"))
    if decide_op is None:
        raise LoncaError("invalid", f"human.submit does not take {op.get('op')!r} operations")

    def decide() -> Draft:
        signatures.check_op(d.state, rs.name, op, sig, rs.humans.get(sig["human"]), d.now_ms())
        draft = decide_op(call, rs, op)
        draft.human = sig
        return draft

    return await d.log.append(rs.name, decide)
