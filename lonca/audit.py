"""Offline verification of a repository's log: the hash chain, every daemon signature and every
human signature, from nothing but the entries. The worker runs the same check when it replays the
log at start; `lonca audit verify` runs it on the database or an exported log, and also checks
that each tree put on trunk is the one its checks passed on (`landing_problem`)."""
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from lonca import humansig
from lonca.canonical import canonical, sha256_hex
from lonca.protocol import ZERO_HASH

# Operations whose allowed entry changes which key a human signs with.
KEY_OPS = {"human.enroll", "human.rotate", "human.recover"}


def recovery_signed(op) -> bool:
    """Whether `op` (any JSON value) is of a kind the recovery key signs, with no session."""
    return isinstance(op, dict) and (op.get("op") == "human.recover" or (op.get("op") == "daemon.recover" and "recover" in op))


def recovered_human(op) -> str | None:
    """The name whose recovery key signs `op` instead of their enrolled key (seed: no session is
    needed), or None: human.recover, and daemon.recover with `recover` (log format 27). `op` may
    be any JSON value (the socket's edge asks before validating)."""
    if not recovery_signed(op):
        return None
    if op.get("op") == "human.recover":
        return op.get("human")
    return op["recover"].get("human") if isinstance(op["recover"], dict) else None


@dataclass
class Problem:
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.reason}"


def daemon_sig_ok(public_hex: str, hash_hex: str, sig_hex: str) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)).verify(bytes.fromhex(sig_hex), bytes.fromhex(hash_hex))
        return True
    except (ValueError, InvalidSignature):
        return False


class ChainVerifier:
    """Feed entries in order; `check` returns the problem with one, or None and moves on."""

    def __init__(self, repo: str):
        self.repo = repo
        self.expected_seq = 1
        self.prev = ZERO_HASH
        self.daemon_key: str | None = None
        self.humans: dict[str, dict] = {}
        self.recovery: dict[str, dict] = {}  # name -> recovery key (human.recovery_key)

    @classmethod
    def after(cls, repo: str, seq: int, hash_hex: str, daemon_key: str, humans: dict[str, dict],
              recovery: dict[str, dict]) -> "ChainVerifier":
        """A verifier that goes on after entry `seq` (hash `hash_hex`), with the keys in force
        then: the worker's start from a checkpoint (service/checkpoint.py) checks the rest."""
        v = cls(repo)
        v.expected_seq, v.prev, v.daemon_key, v.humans = seq + 1, hash_hex, daemon_key, dict(humans)
        v.recovery = dict(recovery)
        return v

    def check(self, text: str, hash_hex: str, sig_hex: str) -> Problem | None:
        seq = self.expected_seq
        try:
            entry = json.loads(text)
        except ValueError:
            return Problem(seq, "the entry is not JSON")
        if not isinstance(entry, dict) or canonical(entry) != text.encode():
            return Problem(seq, "the entry is not canonical JSON")
        if sha256_hex(text.encode()) != hash_hex:
            return Problem(seq, "the hash does not match the entry")
        if entry.get("seq") != seq:
            return Problem(seq, f"sequence number {entry.get('seq')!r} where {seq} was expected")
        if entry.get("prev") != self.prev:
            return Problem(seq, "prev does not name the previous entry's hash")
        op = entry.get("op") or {}
        if seq == 1:
            if op.get("op") != "repo.init" or op.get("repo") != self.repo:
                return Problem(seq, "the first entry is not this repository's repo.init")
            self.daemon_key = op.get("daemon_key")
        signing = self.daemon_key
        if op.get("op") == "daemon.recover":
            # signed by the daemon that adopts the log, which never held the key of the entries
            # before it (a restore elsewhere): a human's signature is what vouches for the move
            if entry.get("human") is None or (entry.get("decision") or {}).get("outcome") != "allow":
                return Problem(seq, "a daemon.recover is an allowed entry signed by a human")
            signing = op.get("key") if isinstance(op.get("key"), str) else None
        if not signing or not daemon_sig_ok(signing, hash_hex, sig_hex):
            return Problem(seq, "the daemon signature does not verify")
        problem = self._human(entry, op)
        if problem:
            return Problem(seq, problem)
        self._advance(entry, op)
        self.expected_seq += 1
        self.prev = hash_hex
        return None

    def signer_key(self, entry: dict) -> dict | None:
        """The key the human signature of `entry`, the next to check, must verify with: the one
        repo.init enrols, or the signer's enrolled key."""
        sig, op = entry.get("human"), entry.get("op") or {}
        if op.get("op") == "repo.init":
            return op.get("human_key")
        recovered = recovered_human(op)
        if recovered is not None:
            return self.recovery.get(recovered) if isinstance(sig, dict) and sig.get("human") == recovered else None
        return self.humans.get(sig.get("human")) if isinstance(sig, dict) else None

    def _human(self, entry: dict, op: dict) -> str | None:
        sig = entry.get("human")
        if sig is None:
            return None
        name = sig.get("human") if isinstance(sig, dict) else None
        key = self.signer_key(entry)
        if op.get("op") == "repo.init" and name != op.get("human"):
            return "repo.init is not signed by the human it enrols"
        if key is None:
            return f"signed by {name!r}, who is not enrolled"
        try:
            message = humansig.intent_bytes(self.repo, op, sig["nonce"], sig["issued_ms"])
        except (KeyError, TypeError, ValueError):
            return "the human signature is malformed"
        if not humansig.verify(key, message, sig.get("sig", "")):
            return f"the human signature of {name} does not verify"
        return None

    def _advance(self, entry: dict, op: dict) -> None:
        if (entry.get("decision") or {}).get("outcome") != "allow":
            return
        kind = op.get("op")
        if kind == "repo.init":
            self.humans[op["human"]] = op["human_key"]
        elif kind in KEY_OPS:
            self.humans[op["human"]] = op["key"]
            if kind != "human.rotate":  # a name enrolled again has none; a recovery key recovers once
                self.recovery.pop(op["human"], None)
        elif kind == "human.recovery_key":
            self.recovery[op["human"]] = op["key"]
        elif kind == "human.revoke":
            self.humans.pop(op.get("human"), None)
            self.recovery.pop(op.get("human"), None)
        elif kind == "daemon.rotate":
            self.daemon_key = op.get("key")
        elif kind == "daemon.recover":
            self.daemon_key = op.get("key")
            recover = op.get("recover")
            if isinstance(recover, dict):  # the name moves to a new key; the recovery key is spent
                self.humans[recover.get("human")] = recover.get("key")
                self.recovery.pop(recover.get("human"), None)


def verify_entries(repo: str, rows: Iterable[tuple[str, str, str]]) -> tuple[int, Problem | None]:
    """(entries verified, first problem or None) for (entry text, hash, sig) rows in seq order."""
    verifier = ChainVerifier(repo)
    count = 0
    for text, hash_hex, sig_hex in rows:
        problem = verifier.check(text, hash_hex, sig_hex)
        if problem:
            return count, problem
        count += 1
    return count, None


# -- each integrated tree against its attestations ----------------------------------------------
# Trunk stays green only if every tree that became trunk is the subject of the passing checks of
# its integration entry (docs/decisions.md, "Independent lanes"). The entry names commits; a
# commit's id fixes its tree, which the repository's git store tells.

CHECK_KINDS = {"build", "tests", "extended", "named"}


def _final(attestation: dict) -> bool:
    """The last attempt of its check (every attestation of a log from before retries is)."""
    details = attestation.get("details") or {}
    return details.get("attempt") == details.get("attempts")


def landing_problem(entry: dict, tree_of: Callable[[str], str | None] | None) -> str | None:
    """Why an allowed change.integrate or change.integrate_batch does not carry passing checks of
    exactly the tree it put on trunk, or None. `tree_of(commit)` is the commit's tree id from the
    store (None when the store lacks it); without a store, only that every check passed on one
    tree is checked."""
    op = entry.get("op") or {}
    if op.get("op") not in ("change.integrate", "change.integrate_batch") \
            or (entry.get("decision") or {}).get("outcome") != "allow":
        return None
    finals = [a for a in entry.get("evidence") or () if a.get("check") in CHECK_KINDS and _final(a)]
    if not finals:
        return None     # the policy owed no check
    for a in finals:
        if a.get("result") != "pass":
            name = (a.get("details") or {}).get("name", a.get("check"))
            return f"integrated although its {name} check ended {a.get('result')!r}"
    subjects = sorted({str(a.get("subject_tree")) for a in finals})
    if len(subjects) > 1:
        return f"integrated on checks of {len(subjects)} different trees ({', '.join(s[:12] for s in subjects)})"
    head = op["merged"] if op["op"] == "change.integrate" else op["merged"][-1][1]
    if tree_of is None:
        return None
    tree = tree_of(head)
    if tree is None:
        return f"the integrated commit {head} is not in the repository's store"
    if tree != subjects[0]:
        return (f"trunk became commit {head[:12]} of tree {tree[:12]}, but its checks passed on "
                f"tree {subjects[0][:12]}: that tree was never checked")
    return None


def landing_problems(rows: Iterable[tuple[str, str, str]],
                     tree_of: Callable[[str], str | None] | None) -> tuple[int, Problem | None]:
    """(integrations with checks, first problem or None) over a verified chain's rows."""
    count = 0
    for text, _, _ in rows:
        entry = json.loads(text)
        why = landing_problem(entry, tree_of)
        if why:
            return count, Problem(entry["seq"], why)
        count += entry["op"]["op"] in ("change.integrate", "change.integrate_batch") and \
            entry["decision"]["outcome"] == "allow" and any(a.get("check") in CHECK_KINDS for a in entry["evidence"])
    return count, None


# -- the witness of a log's head -----------------------------------------------------------------
# A log whose last entries were deleted still verifies: every entry left is chained and signed.
# The worker therefore writes, after every commit, the seq, hash and daemon signature of each
# repository's last entry to a file outside the database (LONCA_HOME/witness/<repo>.json). A log
# that ends before its witness, or differs from it at the witness's seq, lost its end.

def witness_path(folder: Path, repo: str) -> Path:
    return folder / f"{repo}.json"


def write_witness(folder: Path, repo: str, seq: int, hash_hex: str, sig_hex: str) -> None:
    """Replace the witness atomically (a crash leaves the old one: behind the log, never ahead)."""
    path = witness_path(folder, repo)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"repo": repo, "seq": seq, "hash": hash_hex, "sig": sig_hex}) + "\n")
    os.replace(tmp, path)


def read_witnesses(folder: Path) -> dict[str, dict]:
    """repo -> its witness, for every readable witness in `folder`."""
    out = {}
    if folder.is_dir():
        for path in folder.glob("*.json"):
            try:
                w = json.loads(path.read_text())
                out[w["repo"]] = {"seq": int(w["seq"]), "hash": str(w["hash"]), "sig": str(w["sig"])}
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return out


def witness_problem(witness: dict, last_seq: int, hash_at: str | None, daemon_key: str | None) -> str | None:
    """Why a log (ending at `last_seq`, whose entry at the witness's seq has hash `hash_at`)
    disagrees with its witness, or None."""
    seq = witness["seq"]
    if seq > last_seq:
        signed = bool(daemon_key) and daemon_sig_ok(daemon_key, witness["hash"], witness["sig"])
        how = "signed with the log's daemon key" if signed else "its signature does not verify with the log's daemon key"
        return (f"the log ends at seq {last_seq} but its witness records seq {seq} as committed ({how}): "
                "entries were removed from the end of the log; restore the database from a backup")
    if hash_at != witness["hash"]:
        return f"the entry at seq {seq} is not the one its witness records: the log was rewritten; restore it from a backup"
    return None
