"""Human sessions and signed operations: repo.prepare_init, repo.init, human.login,
human.logout, human.submit."""
import asyncio
import re
import secrets
import shutil
from typing import Awaitable, Callable

from lonca import humansig, sshsig, webauthn
from lonca.audit import recovered_human, recovery_signed
from lonca.canonical import content_hash
from lonca.protocol import LOGIN_TTL_DEFAULT_MS, LOGIN_TTL_MAX_MS, LoncaError

from . import cedar_policy, gitstore, presence, remotes, signatures
from .auth import new_human_token, token_hash
from .log import Draft, allow, deny
from .policy import load as load_policy
from .methods import Call, method
from .review_methods import decide_approve, decide_comment, decide_policy_update, decide_priority, decide_reject
from .session_methods import decide_cap_revoke, decide_session_start
from .store import NonceRow, PreparedRow, TokenRow

# the hex length of a key's public part where it is fixed (a WebAuthn key's varies)
KEY_ALGS = {"ed25519": 64, **dict.fromkeys(webauthn.KEY_ALGS), **sshsig.PUBLIC_HEX_LEN}


def check_key(key) -> dict:
    if not isinstance(key, dict) or key.get("alg") not in KEY_ALGS or not isinstance(key.get("public"), str):
        raise LoncaError("invalid", 'a human key is {"alg": "ed25519" (or sk-ed25519, sk-p256, webauthn-ed25519, webauthn-es256), "public": lowercase hex}')
    if not re.fullmatch(r"[0-9a-f]+", key["public"]) or (KEY_ALGS[key["alg"]] and len(key["public"]) != KEY_ALGS[key["alg"]]):
        raise LoncaError("invalid", "the human key's public part must be lowercase hex of the right length")
    if key["alg"] == "ed25519" and (why := humansig.ed25519_key_problem(bytes.fromhex(key["public"]))):
        raise LoncaError("invalid", why)
    if key["alg"] in webauthn.KEY_ALGS:
        webauthn.credential(key)  # refuses a WebAuthn key that could never verify (or of small order)
    if key["alg"] in sshsig.KEY_TYPES and (why := sshsig.key_problem(key)):
        raise LoncaError("invalid", why)
    return {"alg": key["alg"], "public": key["public"]}


@method("repo.prepare_init", "bootstrap")
async def prepare_init(call: Call) -> dict:
    p = call.params
    d = call.ctx
    name, human, key = p["repo"], p["human"], check_key(p["human_key"])
    source, branch = p.get("import_from"), p.get("branch")
    # seed 001: "default: hardened on a hardened daemon, else cooperative"
    profile = p.get("profile") or ("hardened" if d.config.hardened else "cooperative")
    without_presence = p.get("without_presence", False)
    if without_presence and profile != "hardened":
        raise LoncaError("invalid", "without_presence goes with the hardened profile only")
    if profile == "hardened" and not presence.proves_presence(key) and not without_presence:
        chosen = "asked for" if p.get("profile") else "this hardened daemon's default"
        raise LoncaError("invalid", f"presence_required: the hardened profile ({chosen}) needs a key that proves presence "
                                    "(a passkey or security key); or ask for without_presence, or the cooperative profile")
    if d.state.repo(name):
        raise LoncaError("conflict", f"the repository {name} exists")
    staging = d.config.repos_dir / ".staging" / secrets.token_hex(8)
    staging.parent.mkdir(parents=True, exist_ok=True)
    if source:
        from_copy = remotes.check_remote(d.config, source, "import_from")
        trunk, branch = await asyncio.to_thread(remotes.import_store, staging, source, branch, from_copy)
    else:
        trunk = await asyncio.to_thread(gitstore.create_empty, staging, d.now_ms())

    def read_staged() -> tuple[list[dict], str | None, str | None]:
        store = gitstore.open_store(staging)  # opened on the thread that reads it
        return (gitstore.list_tree(store, trunk), gitstore.policy_text(store, trunk),
                gitstore.policy_text(store, trunk, "policy.cedar"))
    files, text, cedar = await asyncio.to_thread(read_staged)
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
    if why := cedar_policy.problem(cedar_policy.load(cedar)):
        warnings.append(f"{why} (human.prepare_policy, docs/policy.md)")
    op = {"op": "repo.init", "repo": name, "daemon_key": d.keys.public, "human": human, "human_key": key,
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
SUBMIT_OPS: dict[str, Callable[..., Draft]] = {
    "session.start": decide_session_start, "approve": decide_approve, "reject": decide_reject, "comment": decide_comment,
    "policy.update": decide_policy_update, "priority": decide_priority, "cap.revoke": decide_cap_revoke}
# Kinds whose submission does work off the loop around the append: (call, rs, op, append) -> the
# answer, where append(decide_op) logs the signed op as decided by decide_op(call, rs, op). A
# bridge fetches facts before its decision and pushes after its entry (service/bridge_methods.py).
SUBMIT_AROUND: dict[str, Callable[..., Awaitable[dict]]] = {}
Append = Callable[..., Awaitable[dict]]  # the `append` a SUBMIT_AROUND function gets: append(decide_op) -> the answer


async def check_prepared(call: Call, op: dict, prepare: str) -> None:
    """A prepared operation (import, push, a human's change) is taken only as this daemon's
    `prepare` method wrote it: its hash is in the prepared table."""
    if await call.ctx.db_get(PreparedRow, content_hash(op)) is None:
        raise LoncaError("invalid", f"this {op['op']} was not prepared by this daemon; call {prepare} "
                                    "and sign its op unchanged")


def policy_denied(draft: Draft, reasons: list[str]) -> Draft:
    """The draft denied by policy.cedar: logged as signed, with none of what its allowing did (the
    rows, the after-commit work) and no agent token in its answer (a denied session.start
    answers as one denied for its continuation does)."""
    def result(entry: dict) -> dict:
        out = {k: v for k, v in (draft.result(entry) if draft.result else {}).items() if k != "token"}
        if "sessions_ended" in out:  # the allowing's count or list; the rows that would end them were dropped
            out["sessions_ended"] = type(out["sessions_ended"])()
        return out
    return Draft(actor=draft.actor, op=draft.op, decision=deny(*reasons), human=draft.human, facts=draft.facts,
                 symbols_engine=draft.symbols_engine, result=result)


@method("human.submit", "human", writes=True)
async def submit(call: Call) -> dict:
    p = call.params
    d = call.ctx
    rs = call.repo_state()
    op = p["op"]
    kind = op.get("op")
    sig = signatures.check_shape(p["sig"], "denied")
    decide_op = SUBMIT_OPS.get(kind)
    if decide_op is None:
        raise LoncaError("invalid", f"human.submit does not take {kind!r} operations")
    if kind != "daemon.recover" and not d.keys.holds(rs.daemon_key):
        raise LoncaError("foreign_key", f"{rs.name}'s log is on daemon key {rs.daemon_key[:16]}…, which this daemon "
                                        "does not hold: the repository waits for daemon.recover (lonca human "
                                        "recover-daemon-key), signed by one of its humans")
    recovered = recovered_human(op)
    if recovery_signed(op):  # no session needed: the recovery key's signature is the credential
        if sig["human"] != recovered:
            raise LoncaError("denied", "bad_human_signature: a recovery is signed with the recovery key of the human it recovers")
    elif call.auth is None:
        raise LoncaError("unauthenticated", f"{kind} needs a human session; log in (lonca human login)")
    elif sig["human"] != call.auth.human:
        raise LoncaError("forbidden", "the signer must be the human of this session")

    async def append(decide_op: Callable[..., Draft] = decide_op) -> dict:
        def decide() -> Draft:
            if recovered is not None:
                key = rs.recovery.get(recovered)
                if key is None:
                    raise LoncaError("denied", f"not_enrolled: {recovered} has no recovery key in {rs.name} "
                                               "(human.recovery_key sets one; a recovery key recovers once)")
            else:
                key = rs.humans.get(sig["human"])
            signatures.check_op(d.state, rs.name, op, sig, key, d.now_ms())
            if key is not None and recovered is None and (why := presence.required(rs, key, op)):
                raise LoncaError("denied", why)
            draft = decide_op(call, rs, op)
            draft.human = sig
            if draft.decision["outcome"] != "deny" and (why := cedar_policy.human_reasons(rs, sig["human"], op, draft.facts)):
                return policy_denied(draft, why)
            return draft
        return await d.log.append(rs.name, decide)

    around = SUBMIT_AROUND.get(kind)
    return await (around(call, rs, op, append) if around else append())
