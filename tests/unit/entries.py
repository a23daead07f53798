"""Log entries made by hand, for replaying the worker's core without a worker: a steppable clock
and a chain of real entries (canonical JSON, SHA-256, Ed25519 daemon signature), as LogWriter makes
them. Imports nothing but the state, so a test can check that replay needs no method module."""
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca.canonical import canonical, sha256_hex
from lonca.protocol import LOG_FORMAT, ZERO_HASH

DAEMON = {"kind": "daemon"}
TRUNK = "a" * 40
HUMAN_KEY = {"alg": "ed25519", "public": "b" * 64}


class Clock:
    """Time in ms that moves only when told to."""

    def __init__(self, now_ms: int = 1_700_000_000_000):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def step(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms


def agent(session: str) -> dict:
    return {"kind": "agent", "session": session, "agent": f"agent-{session}"}


class Chain:
    """One repository's log: `add` appends an entry and returns it; `rows` are (entry, hash, sig)."""

    def __init__(self, repo: str = "demo", clock: Clock | None = None):
        self.repo = repo
        self.clock = clock or Clock()
        self.key = Ed25519PrivateKey.generate()
        self.rows: list[tuple[dict, str, str]] = []
        self.add({"op": "repo.init", "repo": repo, "trunk": TRUNK, "policy": TRUNK, "human": "ada",
                  "human_key": HUMAN_KEY, "daemon_key": self.key.public_key().public_bytes_raw().hex()})

    def add(self, op: dict, actor: dict = DAEMON, outcome: str = "allow", reasons=(), **extra) -> dict:
        prev = self.rows[-1][1] if self.rows else ZERO_HASH
        entry = {"format": LOG_FORMAT, "seq": len(self.rows) + 1, "prev": prev, "time_ms": self.clock(),
                 "actor": actor, "op": op, "evidence": [], "facts": None, "symbols_engine": None,
                 "decision": {"outcome": outcome, "reasons": list(reasons)}, "human": None, **extra}
        h = sha256_hex(canonical(entry))
        self.rows.append((entry, h, self.key.sign(bytes.fromhex(h)).hex()))
        return entry

    def texts(self) -> list[tuple[str, str, str]]:
        """(entry text, hash, sig) as the database holds them."""
        return [(canonical(e).decode(), h, s) for e, h, s in self.rows]

    # -- the operations the tests replay ----------------------------------------------------

    def start(self, session: str, ttl_ms: int = 3_600_000, scope: dict | None = None) -> dict:
        return self.add({"op": "session.start", "session": session, "agent": f"agent-{session}", "model": None,
                         "task": None, "scope": scope or {"paths": ["**"]},
                         "expires_ms": self.clock() + ttl_ms}, actor={"kind": "human", "name": "ada"})

    def beat(self, session: str) -> dict:
        return self.add({"op": "observe", "session": session, "events": [{"kind": "heartbeat"}]}, actor=agent(session))

    def acquire(self, session: str, set_id: str, symbols: list[str], ttl_ms: int = 600_000, outcome="allow") -> dict:
        items = [{"symbol": s, "kind": "edit"} for s in symbols]
        return self.add({"op": "lease.acquire", "set": set_id, "items": items, "ttl_ms": ttl_ms, "intent": "work"},
                        actor=agent(session), outcome=outcome)

    def release(self, session: str, set_id: str) -> dict:
        return self.add({"op": "lease.release", "set": set_id}, actor=agent(session))

    def end(self, session: str) -> dict:
        return self.add({"op": "session.end", "session": session}, actor=agent(session))

    def message(self, frm: str, to: str, note: str) -> dict:
        return self.add({"op": "negotiate", "thread": "t1", "to_session": to,
                         "message": {"type": "counter", "note": note}}, actor=agent(frm))


def replay(chain: Chain, state=None, start: int = 1):
    """A State made (or moved on) by the entries of `chain` from seq `start`."""
    from lonca.service.state import State
    state = state or State()
    for entry, h, _ in chain.rows[start - 1:]:
        state.apply(chain.repo, entry, h)
    return state
