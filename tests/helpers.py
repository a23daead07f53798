"""Small helpers the integration tests share: a human with a file key, a repository, a session."""
import contextlib
import secrets
import sqlite3

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


def demo_sessions(client, source_repo, agents: tuple[str, ...] = ("agent-1",)) -> tuple[humankeys.HumanKey, str, list[str]]:
    """Alice's repository "demo" imported from `source_repo`, her login, and a session a name in
    `agents`: (her key, her token, the sessions' tokens)."""
    key = human_key("alice")
    init_repo(client, key, "demo", import_from=str(source_repo))
    htoken = login(client, key)
    return key, htoken, [start_session(client, key, htoken, agent=a)["token"] for a in agents]


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


class Passkey:
    """A WebAuthn credential in software, for tests over the socket without a browser: a real
    Ed25519, P-256 (ES256) or RSA-2048 (RS256) key whose assertions carry authenticator data with
    user presence (and verification) set, signed over the challenge the worker expects (DESIGN.md,
    "WebAuthn"). The browser tests use Chromium's virtual authenticator instead."""

    RP_ID, ORIGIN = "localhost", "http://localhost:8765"
    CREDENTIAL_ID = "c3dhbXA"

    def __init__(self, name: str, alg: str = "webauthn-ed25519", rsa_bits: int = 2048):
        import cbor2
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        from lonca import webauthn
        self.name, self.alg = name, alg
        if alg == "webauthn-ed25519":
            self.private = Ed25519PrivateKey.generate()
            x = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            cose = {1: 1, 3: -8, -1: 6, -2: x}
        elif alg == "webauthn-es256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            point = self.private.public_key().public_numbers()
            cose = {1: 2, 3: -7, -1: 1, -2: point.x.to_bytes(32, "big"), -3: point.y.to_bytes(32, "big")}
        else:
            assert alg == "webauthn-rs256", alg
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
            numbers = self.private.public_key().public_numbers()
            cose = {1: 3, 3: -257, -1: numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big"),
                    -2: numbers.e.to_bytes(3, "big")}
        self.cose = cbor2.dumps(cose)
        self.public = webauthn.make_key(alg, self.cose, self.CREDENTIAL_ID, self.RP_ID, self.ORIGIN)
        self.count = 0

    def _sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding
        if self.alg == "webauthn-es256":
            return self.private.sign(data, ec.ECDSA(hashes.SHA256()))
        if self.alg == "webauthn-rs256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        return self.private.sign(data)

    def registration(self, challenge: bytes) -> str:
        """The browser's `credential.toJSON()` for a registration of this credential with attestation
        "none", as JSON text (what the console hands to webauthn.key_from_registration)."""
        import base64
        import hashlib
        import json

        import cbor2

        def b64u(b: bytes) -> str:
            return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        cred_id = base64.urlsafe_b64decode(self.CREDENTIAL_ID + "=" * (-len(self.CREDENTIAL_ID) % 4))
        auth_data = (hashlib.sha256(self.RP_ID.encode()).digest() + bytes([0x45]) + (0).to_bytes(4, "big")
                     + bytes(16) + len(cred_id).to_bytes(2, "big") + cred_id + self.cose)  # UP, UV, AT
        client = json.dumps({"type": "webauthn.create", "challenge": b64u(challenge), "origin": self.ORIGIN,
                             "crossOrigin": False}).encode()
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return json.dumps({"id": self.CREDENTIAL_ID, "rawId": self.CREDENTIAL_ID, "type": "public-key",
                           "response": {"clientDataJSON": b64u(client), "attestationObject": b64u(attestation)},
                           "clientExtensionResults": {}})

    def assertion(self, challenge: str) -> dict:
        """The browser's `credential.toJSON()` for an assertion over `challenge` (base64url, as
        the console's request options carry it): what a console's /ceremony/finish takes."""
        import base64
        import hashlib
        import json

        def b64u(b: bytes) -> str:
            return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        self.count += 1
        auth_data = hashlib.sha256(self.RP_ID.encode()).digest() + bytes([0x05]) + self.count.to_bytes(4, "big")
        client = json.dumps({"type": "webauthn.get", "challenge": challenge, "origin": self.ORIGIN,
                             "crossOrigin": False}).encode()
        signature = self._sign(auth_data + hashlib.sha256(client).digest())
        return {"id": self.CREDENTIAL_ID, "rawId": self.CREDENTIAL_ID, "type": "public-key",
                "response": {"authenticatorData": b64u(auth_data), "clientDataJSON": b64u(client),
                             "signature": b64u(signature)}}

    def _sig(self, message: bytes, nonce: str, issued_ms: int) -> dict:
        from webauthn.helpers import bytes_to_base64url

        from lonca import webauthn
        r = self.assertion(bytes_to_base64url(webauthn.challenge(message)))["response"]
        return {"human": self.name, "nonce": nonce, "issued_ms": issued_ms,
                "sig": webauthn.encode_sig(r["authenticatorData"], r["clientDataJSON"], r["signature"])}

    def sign_op(self, repo: str, op: dict) -> dict:
        from lonca import humansig
        nonce, issued = secrets.token_hex(16), now_ms()
        return self._sig(humansig.intent_bytes(repo, op, nonce, issued), nonce, issued)

    def sign_login(self, repo: str | None, ttl_ms: int) -> dict:
        from lonca import humansig
        nonce, issued = secrets.token_hex(16), now_ms()
        return self._sig(humansig.login_bytes(repo, self.name, ttl_ms, nonce, issued), nonce, issued)


@contextlib.contextmanager
def sqlite_write_locked(home):
    """The worker's SQLite database (in `home`) with its write lock held by another connection, as
    a backup tool would: a commit meanwhile waits past the busy timeout and fails."""
    blocker = sqlite3.connect(home / "lonca.db", timeout=1)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.rollback()
        blocker.close()


def db_rows(worker, sql: str) -> list[tuple]:
    """The rows of `sql` in a real worker's database (its LONCA_DATABASE_URL, else its SQLite file)."""
    from sqlalchemy import create_engine, text
    engine = create_engine(worker.env.get("LONCA_DATABASE_URL") or f"sqlite:///{worker.home / 'lonca.db'}")
    try:
        with engine.begin() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()
