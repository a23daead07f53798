"""Protocol constants every client and the worker share (seed 001, "Wire format", "Error codes")."""
import time

PROTOCOL = 1
LOG_FORMAT = 30  # 29: the priority operation, 30: redact

LINE_MAX = 64 * 1024
BIG_LINE_MAX = 96 * 1024 * 1024
# Methods whose line may exceed LINE_MAX, up to BIG_LINE_MAX (decided from the first 64 KiB).
BIG_METHODS = frozenset({
    "tree", "blobs", "human.prepare_change", "human.prepare_policy", "human.submit",
    "lease.acquire", "lease.interest", "change.propose", "facts.preview", "session.end",
    "hook.event", "hook.input", "hook.stop",
})

AGENT_TOKEN_PREFIX = "lonca_"
HUMAN_TOKEN_PREFIX = "lonca_h_"

LOGIN_TTL_DEFAULT_MS = 3_600_000
LOGIN_TTL_MAX_MS = 86_400_000
SIGNATURE_LIFETIME_MS = 10 * 60_000
SIGNATURE_SKEW_MS = 60_000
NONCE_MIN, NONCE_MAX = 16, 128

# A claim's fields, each named as the facts name it (seed 001, "claim").
# status's lists, which `lists` may name (an addition to the seed): a client that shows one of
# them does not pay for the others (docs/decisions.md, "status.lists")
STATUS_LISTS = ("sessions", "leases", "changes", "pending", "interests", "reservations")
CLAIM_FIELDS = ("edits", "adds", "deletes", "deleted_files", "signature_changes", "tests")

ZERO_HASH = "0" * 64
REPO_NAME_MAX = 64


def actor_label(actor: dict) -> str:
    """The seed's actor label of an actor object: human:<name>, agent:<name>/<session>, daemon."""
    if actor.get("kind") == "agent":
        return f"agent:{actor.get('name')}/{actor.get('session')}"
    if actor.get("kind") == "human":
        return f"human:{actor.get('name')}"
    return "daemon"


class LoncaError(Exception):
    """An error answer of the daemon: a stable code and a message for people."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message}


def claim_from_facts(facts: dict, intent: str) -> dict:
    """The claim that says what `facts` (of facts.preview) say."""
    return {"intent": intent, **{k: facts[k] for k in CLAIM_FIELDS}}


def session_start_op(session: str, agent: str, expires_ms: int, paths: list[str] | None = None,
                     model: str | None = None, task: str | None = None, scratch: list[str] | None = None) -> dict:
    """A session.start op (seed 001, "session.start"), its scope limited to `paths` (all by default)."""
    return {"op": "session.start", "session": session, "agent": agent, "model": model, "task": task,
            "expires_ms": expires_ms,
            "scope": {"paths": paths or ["**"], "symbols": None, "ops": [], "max_files": None, "max_lines": None,
                      "scratch": scratch or []}}


def now_ms() -> int:
    """The protocol's clock: milliseconds since the epoch, as every *_ms field counts them."""
    return int(time.time() * 1000)
