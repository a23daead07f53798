"""The security log outside the operation log: refused logins, signatures and credentials, kept
in the worker's memory (docs/decisions.md, "Security events outside the log"), and the method
security.events that reads it. No event holds a token, a request or file contents."""
import time
from collections import Counter, deque

from lonca.protocol import LoncaError

from .methods import Call, method
from .presence import CLONED
from .server import Peer

KEPT = 10_000
SHOWN = 100
DAY_MS = 24 * 3600_000
SIGNATURE_REASONS = ("bad_human_signature", "stale_human_signature", "bad_nonce", "nonce_reused",
                     "presence_required", "not_enrolled", "unknown_human")
RECORDED_CODES = ("unauthenticated", "forbidden", "denied")

EVENTS: deque[dict] = deque(maxlen=KEPT)


def kind_of(error: LoncaError) -> str | None:
    reason = error.message.split(":", 1)[0]
    if CLONED in error.message:  # a copy of a passkey signed: the console offers to revoke the key
        return "cloned_authenticator"
    if reason in SIGNATURE_REASONS:
        return "signature_refused"
    return error.code if error.code in RECORDED_CODES else None


def note(peer: Peer, req: dict, error: LoncaError) -> None:
    """Record a refusal worth a human's attention; called for every error answer."""
    kind = kind_of(error)
    if kind is None:
        return
    repo = req.get("repo")
    event = {"time_ms": int(time.time() * 1000), "kind": kind, "method": str(req.get("method"))[:64],
             "uid": peer.uid, "code": error.code, "detail": error.message[:300]}
    if isinstance(repo, str):
        event["repo"] = repo[:64]
    if kind == "cloned_authenticator":  # whose key it is: the name the refused signature signed as
        params = req.get("params")
        sig = params.get("sig") if isinstance(params, dict) else None
        if isinstance(sig, dict) and isinstance(sig.get("human"), str):
            event["human"] = sig["human"][:64]
    EVENTS.append(event)


@method("security.events", "any human")
async def security_events(call: Call) -> dict:
    d = call.ctx
    since = call.params.get("since_ms")
    since = d.now_ms() - DAY_MS if since is None else since
    mine = set(d.state.human_repos(call.auth.human, call.auth.key))
    seen = [e for e in EVENTS if e["time_ms"] >= since and e.get("repo") in mine | {None}]
    return {"since_ms": since, "counts": dict(Counter(e["kind"] for e in seen)), "events": seen[-SHOWN:][::-1]}
