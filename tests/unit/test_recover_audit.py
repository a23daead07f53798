"""The offline verifier (`lonca audit verify`, the worker's replay, a restore) over a daemon.recover:
the entry is signed with the key it adopts the log with, vouched for by an enrolled human (or, with
`recover`, by that human's recovery key), and the entries after it verify with the new key only.
Entries made by hand with real keys; each malformation is one problem at the recovery's seq."""
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lonca import humansig
from lonca.audit import verify_entries
from lonca.canonical import canonical, sha256_hex
from lonca.protocol import LOG_FORMAT, ZERO_HASH

REPO = "demo"
TRUNK = "a" * 40


def public(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes_raw().hex()


def human_key(key: Ed25519PrivateKey) -> dict:
    return {"alg": "ed25519", "public": public(key)}


class Log:
    def __init__(self, daemon: Ed25519PrivateKey, ada: Ed25519PrivateKey):
        self.rows: list[tuple[str, str, str]] = []
        self.add(daemon, {"op": "repo.init", "repo": REPO, "daemon_key": public(daemon), "human": "ada",
                          "human_key": human_key(ada), "policy": TRUNK, "trunk": TRUNK})

    def add(self, daemon: Ed25519PrivateKey, op: dict, signer: Ed25519PrivateKey | None = None,
            outcome: str = "allow") -> None:
        human = None
        if signer is not None:
            nonce, issued = "n" * 32 + str(len(self.rows)), 1_700_000_000_000
            human = {"human": "ada", "nonce": nonce, "issued_ms": issued,
                     "sig": signer.sign(humansig.intent_bytes(REPO, op, nonce, issued)).hex()}
        entry = {"format": LOG_FORMAT, "seq": len(self.rows) + 1, "prev": self.rows[-1][1] if self.rows else ZERO_HASH,
                 "time_ms": 1_700_000_000_000, "actor": {"kind": "human", "name": "ada"}, "op": op, "evidence": [],
                 "facts": None, "symbols_engine": None, "decision": {"outcome": outcome, "reasons": []}, "human": human}
        text = canonical(entry)
        h = sha256_hex(text)
        self.rows.append((text.decode(), h, daemon.sign(bytes.fromhex(h)).hex()))

    def problem(self) -> str | None:
        _count, problem = verify_entries(REPO, self.rows)
        return str(problem) if problem else None


@pytest.fixture
def keys():
    return {name: Ed25519PrivateKey.generate() for name in ("old", "new", "ada", "ada2", "recovery", "mallory")}


def test_a_recovery_signed_by_the_new_key_and_an_enrolled_human_verifies(keys):
    log = Log(keys["old"], keys["ada"])
    log.add(keys["new"], {"op": "daemon.recover", "key": public(keys["new"])}, signer=keys["ada"])
    log.add(keys["new"], {"op": "freeze", "reason": "x"}, signer=keys["ada"])
    assert log.problem() is None
    log.add(keys["old"], {"op": "unfreeze", "reason": "x"}, signer=keys["ada"])  # the old key signs no more
    assert log.problem() == "seq 4: the daemon signature does not verify"


@pytest.mark.parametrize("how, problem", [
    ({"daemon": "old"}, "the daemon signature does not verify"),     # the old key can not adopt the log for a new one
    ({"signer": None}, "a daemon.recover is an allowed entry signed by a human"),
    ({"outcome": "deny"}, "a daemon.recover is an allowed entry signed by a human"),
    ({"signer": "mallory"}, "the human signature of ada does not verify"),
    ({"key": "mallory"}, "the daemon signature does not verify"),     # signed by another key than it names
])
def test_a_malformed_recovery_is_a_problem(keys, how, problem):
    log = Log(keys["old"], keys["ada"])
    signer = how.get("signer", "ada")
    log.add(keys[how.get("daemon", "new")], {"op": "daemon.recover", "key": public(keys[how.get("key", "new")])},
            signer=keys[signer] if signer else None, outcome=how.get("outcome", "allow"))
    assert log.problem() == f"seq 2: {problem}"


def test_a_recovery_with_recover_is_signed_by_the_recovery_key_and_moves_the_name(keys):
    log = Log(keys["old"], keys["ada"])
    log.add(keys["old"], {"op": "human.recovery_key", "human": "ada", "key": human_key(keys["recovery"])}, signer=keys["ada"])
    op = {"op": "daemon.recover", "key": public(keys["new"]), "recover": {"human": "ada", "key": human_key(keys["ada2"])}}
    wrong = Log(keys["old"], keys["ada"])
    wrong.rows = list(log.rows)
    wrong.add(keys["new"], op, signer=keys["ada"])  # the enrolled key is not the recovery key
    assert wrong.problem() == "seq 3: the human signature of ada does not verify"
    log.add(keys["new"], op, signer=keys["recovery"])
    log.add(keys["new"], {"op": "freeze", "reason": "x"}, signer=keys["ada2"])
    assert log.problem() is None
    log.add(keys["new"], {"op": "unfreeze", "reason": "x"}, signer=keys["ada"])  # the lost key no more
    assert log.problem() == "seq 5: the human signature of ada does not verify"
