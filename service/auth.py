"""Tokens and credentials (seed 001, "Credentials"). Tokens are kept only as SHA-256 hashes."""
import secrets
from dataclasses import dataclass

from lonca.audit import recovery_signed
from lonca.canonical import sha256_hex
from lonca.protocol import AGENT_TOKEN_PREFIX, HUMAN_TOKEN_PREFIX, LoncaError

from .state import State
from .store import TokenRow

CREDENTIALS = ("public", "login", "agent", "human", "any human", "bootstrap", "read", "any")
# Methods that still answer an agent whose session has ended or expired, with session_inactive.
AFTER_END = frozenset({"session.heartbeat", "session.end"})


@dataclass
class Auth:
    kind: str  # "agent" | "human"
    token_hash: str
    human: str | None = None
    key: dict | None = None
    repo: str | None = None
    session: str | None = None
    agent: str | None = None

    @property
    def actor(self) -> dict:
        if self.kind == "human":
            return {"kind": "human", "name": self.human}
        return {"kind": "agent", "name": self.agent, "session": self.session}


def new_agent_token() -> str:
    # hex keeps an agent token from ever starting with the human prefix
    return AGENT_TOKEN_PREFIX + secrets.token_hex(32)


def new_human_token() -> str:
    return HUMAN_TOKEN_PREFIX + secrets.token_hex(32)


def token_hash(token: str) -> str:
    return sha256_hex(token.encode())


class Tokens:
    """The live tokens, by hash; the database holds them across restarts."""

    def __init__(self, rows: list[TokenRow]):
        self.rows = {r.token_hash: r for r in rows}

    def add(self, row: TokenRow) -> None:
        self.rows[row.token_hash] = row

    def lookup(self, token: str) -> TokenRow | None:
        return self.rows.get(token_hash(token))


def check(credential: str, method: str, req: dict, tokens: Tokens, state: State, now_ms: int) -> tuple[Auth | None, str | None]:
    """(who, repository) for a request, or the seed's error for it."""
    repo = req.get("repo")
    if repo is not None and not isinstance(repo, str):
        raise LoncaError("invalid", "repo is a string")
    token = req.get("token")
    if token is not None and not isinstance(token, str):
        raise LoncaError("invalid", "token is a string")
    if credential in ("public", "login"):
        return None, repo
    if credential == "bootstrap" and token is None and not state.repos:
        return None, repo
    if credential == "human" and token is None and _recovery(method, req):
        return None, repo  # its recovery-key signature is the credential (human.submit checks it)
    if token is None:
        raise LoncaError("unauthenticated", f"{method} needs a session token; log in (lonca human login) or start a session")
    row = tokens.lookup(token)
    if row is None or row.expires_ms <= now_ms or (row.ended and row.kind == "human"):
        raise LoncaError("unauthenticated", "the token is unknown, ended or expired; log in or start a new session")
    if row.kind == "agent":
        return _agent(credential, method, repo, row, state, now_ms)
    return _human(credential, method, repo, row, state)


def _recovery(method: str, req: dict) -> bool:
    """A human.submit of an operation the recovery key signs (seed: it needs no session)."""
    params = req.get("params")
    op = params.get("op") if isinstance(params, dict) else None  # not validated yet: any JSON value
    return method == "human.submit" and recovery_signed(op)


def _agent(credential, method, repo, row: TokenRow, state: State, now_ms: int):
    if credential not in ("agent", "read", "any"):
        raise LoncaError("forbidden", f"{method} is not for an agent session")
    if repo is not None and repo != row.repo:
        raise LoncaError("forbidden", "this agent token belongs to another repository")
    rs = state.repo(row.repo)
    rec = rs.sessions.get(row.session) if rs else None
    if rec is None:
        raise LoncaError("unauthenticated", "the session of this token is unknown; start a new session")
    if row.ended or not rec.active(now_ms):
        if method in AFTER_END:
            raise LoncaError("session_inactive", "the session has ended or expired; stop beating and start a new session")
        raise LoncaError("unauthenticated", "the session has ended or expired; start a new session")
    return Auth(kind="agent", token_hash=row.token_hash, repo=row.repo, session=row.session, agent=rec.agent), row.repo


def _human(credential, method, repo, row: TokenRow, state: State):
    key = {"alg": row.key_alg, "public": row.key_public}
    auth = Auth(kind="human", token_hash=row.token_hash, human=row.human, key=key)
    if credential == "agent":
        raise LoncaError("forbidden", f"{method} needs an agent session token, not a human one")
    if credential in ("human", "read"):
        if repo is None:
            raise LoncaError("invalid", f"{method} needs repo with a human session")
        rs = state.repo(repo)
        if rs is None:
            raise LoncaError("not_found", f"no repository {repo}")
        if rs.humans.get(row.human) != key:
            raise LoncaError("forbidden", f"{row.human} is not enrolled in {repo} with this key")
    elif credential in ("any human", "bootstrap"):
        if state.repos and not state.human_repos(row.human, key):
            raise LoncaError("forbidden", f"{row.human} is not enrolled in any repository of this daemon")
    return auth, repo
