"""Small helpers the integration tests share: a human with a file key, a repository, a session."""
import secrets

from lonca import humankeys
from lonca.protocol import LoncaError, claim_from_facts, now_ms, session_start_op



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
    return {**session_start_op("s-" + secrets.token_hex(6), agent, now_ms() + ttl_ms, model="test-model",
                               task="test task"), **extra}


def start_session(client, key, htoken: str, repo: str = "demo", **extra) -> dict:
    op = session_op(**extra)
    return client.call("human.submit", {"op": op, "sig": key.sign_op(repo, op)}, repo=repo, token=htoken)


def b64(text: str) -> str:
    import base64
    return base64.b64encode(text.encode()).decode()


def claim_of(facts: dict, intent: str = "test change") -> dict:
    """The claim that matches these facts."""
    return claim_from_facts(facts, intent)


def propose(client, token: str, base: str, files: dict, intent: str = "test change", claim: dict | None = None) -> dict:
    """facts.preview, then change.propose with the claim the facts make (unless one is given)."""
    changes = [{"path": p, "content_b64": None if t is None else b64(t), "mode": None} for p, t in files.items()]
    if claim is None:
        facts = client.call("facts.preview", {"base": base, "files": changes}, token=token)["facts"]
        claim = claim_of(facts, intent)
    return client.call("change.propose", {"change": None, "base": base, "files": changes, "claim": claim}, token=token)


def acquire(client, token: str, *items, intent: str = "working on it", ttl_ms: int = 600_000) -> dict:
    lease_items = [i if isinstance(i, dict) else {"symbol": i, "kind": "edit"} for i in items]
    return client.call("lease.acquire", {"set": None, "items": lease_items, "intent": intent, "ttl_ms": ttl_ms}, token=token)


class RepoEnv:
    """A repository `demo` imported from a real git repository, a logged-in human (alice), and
    helpers to start agents and act as the human."""

    def __init__(self, worker, source_repo):
        self.w = worker
        self.human = human_key("alice")
        self.client = worker.client().connect()
        init_repo(self.client, self.human, "demo", import_from=str(source_repo))
        self.token = login(self.client, self.human)

    def agent(self, name: str = "agent", **extra) -> dict:
        return start_session(self.client, self.human, self.token, agent=name, **extra)

    def status(self) -> dict:
        return self.client.call("status", repo="demo", token=self.token)

    @property
    def trunk(self) -> str:
        return self.status()["trunk"]

    def submit(self, op: dict) -> dict:
        return self.client.call("human.submit", {"op": op, "sig": self.human.sign_op("demo", op)}, repo="demo", token=self.token)

    def policy(self, text: str) -> dict:
        op = self.client.call("human.prepare_policy", {"config": text}, repo="demo", token=self.token)["op"]
        return self.submit(op)

    def log(self) -> list:
        return self.client.call("log", {"from": 1}, repo="demo", token=self.token)
