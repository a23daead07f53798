"""Small helpers the integration tests share: a human with a file key, a repository, a session."""
import secrets
import time

from lonca import humankeys
from lonca.protocol import LoncaError


def now_ms() -> int:
    return int(time.time() * 1000)


def human_key(name: str = "alice") -> humankeys.HumanKey:
    """The file key of `name` in the test's LONCA_HUMANS (tests set it through monkeypatch)."""
    return humankeys.load_key(name) or humankeys.create_key(name)


def init_repo(client, key, repo: str = "demo", import_from: str | None = None, branch: str | None = None) -> dict:
    """repo.prepare_init and a signed repo.init; with a session once the daemon serves a repository."""
    try:
        token = login(client, key)
    except LoncaError:
        token = None  # bootstrap: nothing is needed while the daemon serves no repository
    prepared = client.call("repo.prepare_init", {"repo": repo, "human": key.name, "human_key": key.public,
                                                 "import_from": import_from, "branch": branch}, token=token)
    res = client.call("repo.init", {"op": prepared["op"], "sig": key.sign_op(repo, prepared["op"])}, token=token)
    return {**res, "op": prepared["op"]}


def login(client, key, repo: str | None = None, ttl_ms: int = 3_600_000) -> str:
    return client.call("human.login", {"sig": key.sign_login(repo, ttl_ms), "ttl_ms": ttl_ms}, repo=repo)["token"]


def session_op(agent: str = "agent-1", ttl_ms: int = 3_600_000, **extra) -> dict:
    return {"op": "session.start", "session": "s-" + secrets.token_hex(6), "agent": agent, "model": "test-model",
            "task": "test task", "expires_ms": now_ms() + ttl_ms,
            "scope": {"paths": ["**"], "symbols": None, "ops": [], "max_files": None, "max_lines": None, "scratch": []},
            **extra}


def start_session(client, key, htoken: str, repo: str = "demo", **extra) -> dict:
    op = session_op(**extra)
    return client.call("human.submit", {"op": op, "sig": key.sign_op(repo, op)}, repo=repo, token=htoken)
