"""Security keys from the CLI (issue 14): the real ssh-keygen enrols an sk-ed25519 / sk-p256 key
and signs with `ssh-keygen -Y sign -n lonca`, and the CLI's human commands sign with it end to end
against a real worker: login, an approval a file key may not give (presence_required), a refusal
when the key reports no user presence, and `lonca audit verify` over the result.

No FIDO device exists here, so ssh-keygen loads the software authenticator of
tests/sk_provider/lonca_test_sk.c through OpenSSH's security-key provider interface
(SSH_SK_PROVIDER), compiled by this test with gcc against libcrypto (Debian: gcc, libssl-dev).
It is a test authenticator, as the console tests' virtual WebAuthn credential is: ssh-keygen,
ssh-sk-helper, the SSHSIG format and the worker are the real ones."""
import base64
import json
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from helpers import acquire, propose
from lonca import sshsig

PROVIDER_SOURCE = ROOT / "tests" / "sk_provider" / "lonca_test_sk.c"


@pytest.fixture
def database_url():
    """What is tested is the CLI's signing; signatures are checked before anything is stored."""
    return None


@pytest.fixture(scope="session")
def sk_provider(tmp_path_factory) -> Path:
    """The software authenticator, built once per run (a build failure fails the test)."""
    out = tmp_path_factory.mktemp("sk") / "lonca_test_sk.so"
    built = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(out), str(PROVIDER_SOURCE),
                            "-lcrypto"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, f"the test authenticator does not build (make system-deps: gcc, libssl-dev): {built.stderr}"
    return out


def pending_change(env, path: str, symbol: str, text: str) -> int:
    """An agent's change of `path` that waits for a human ([review] agent_changes = "human")."""
    a = env.agent()["token"]
    acquire(env.client, a, f"{path}#{symbol}")
    res = propose(env.client, a, env.trunk, {path: text})
    assert res["decision"]["outcome"] == "escalate", res
    return next(p["seq"] for p in env.status()["pending"] if p["change"] == res["change"])


def blob_of(entry: dict) -> bytes:
    return bytes.fromhex(entry["human"]["sig"])


@pytest.mark.parametrize("kind", ["ed25519", "p256"])
def test_the_cli_signs_with_a_security_key_through_ssh_keygen(repo_env, source_repo, sk_provider, tmp_path, kind):
    env, w = repo_env, repo_env.w
    counter = tmp_path / "sk-counter"
    w.env.update(SSH_SK_PROVIDER=str(sk_provider), LONCA_TEST_SK_COUNTER=str(counter))
    env.policy('[review]\nagent_changes = "human"\n')
    first = pending_change(env, "app.py", "charge", "def charge(amount):\n    return amount * 3\n\n\nclass Client:\n"
                                                    "    def pay(self):\n        return charge(1)\n")
    second = pending_change(env, "lib/util.py", "helper", "def helper():\n    return 43\n")

    made_key = w.cli_json("human", "key", "--human", "bob", "--security-key", kind)
    alg = f"sk-{kind}"
    assert made_key["alg"] == alg and made_key["created"] is True
    handle = Path(w.env["LONCA_HUMANS"]) / "bob.sk"
    assert stat.S_IMODE(handle.stat().st_mode) == 0o600
    line = (handle.parent / "bob.sk.pub").read_text().strip()
    assert sshsig.key_from_openssh(line) == {"alg": alg, "public": made_key["public"]}
    assert w.cli_json("human", "whoami", "--human", "bob") == {"human": "bob", "alg": alg, "public": made_key["public"]}
    assert w.cli("human", "key", "--human", "bob", check=True).stdout.strip() == line  # what enrol --public takes
    w.cli_json("human", "enrol", "bob", "--public", line, "--repo", "demo")
    # from here a file key may not approve: only a key that proves presence
    env.policy('[review]\nagent_changes = "human"\npresence_required = true\n')
    refused = w.cli("approve", str(first), "--repo", "demo", "--json")
    assert refused.returncode == 1 and "presence_required" in refused.stderr, refused.stderr

    # bob's login and approval: each one run of ssh-keygen -Y sign and one "touch"
    approved = w.cli_json("approve", str(first), "--repo", "demo", "--human", "bob")
    assert approved["decision"]["outcome"] == "allow" and approved["target_seq"] == first
    assert int(counter.read_text()) == 2    # the login's signature, then the approval's
    entry = env.log()[approved["seq"] - 1]["entry"]
    assert entry["op"] == {"op": "approve", "target_seq": first, "note": None} and entry["human"]["human"] == "bob"
    blob = blob_of(entry)
    assert blob.startswith(b"SSHSIG") and b"lonca" in blob and b"ssh:lonca" in blob
    # OpenSSH itself reads what the CLI sent as the signature of the intent bytes
    from lonca import humansig
    sig = entry["human"]
    message = humansig.intent_bytes("demo", entry["op"], sig["nonce"], sig["issued_ms"])
    armored = "-----BEGIN SSH SIGNATURE-----\n" + base64.b64encode(blob).decode() + "\n-----END SSH SIGNATURE-----\n"
    (tmp_path / "sig").write_text(armored)
    (tmp_path / "allowed").write_text(f"bob {' '.join(line.split()[:2])}\n")
    checked = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(tmp_path / "allowed"), "-I", "bob", "-n", "lonca",
                              "-s", str(tmp_path / "sig")], input=message, capture_output=True, timeout=30)
    assert checked.returncode == 0, checked.stderr

    # the key signs without the user present: refused, nothing logged, the change still waits
    before = env.status()["next_seq"]
    w.env["LONCA_TEST_SK_NO_UP"] = "1"
    no_touch = w.cli("reject", str(second), "--reason", "no", "--repo", "demo", "--human", "bob", "--json")
    assert no_touch.returncode == 1 and no_touch.stdout == ""
    assert "denied: bad_human_signature" in no_touch.stderr and "user presence" in no_touch.stderr, no_touch.stderr
    login = w.cli("human", "login", "--human", "bob", "--repo", "demo", "--json")
    assert login.returncode == 1 and "bad_human_signature" in login.stderr, login.stderr
    assert env.status()["next_seq"] == before and any(p["seq"] == second for p in env.status()["pending"])
    del w.env["LONCA_TEST_SK_NO_UP"]
    assert w.cli_json("approve", str(second), "--repo", "demo", "--human", "bob")["decision"]["outcome"] == "allow"

    # a hardened repository made by a human whose only key is the security key
    made = w.cli_json("init", "hard", "--import", str(source_repo), "--profile", "hardened", "--human", "bob")
    assert made["profile"] == "hardened" and made["decision"]["outcome"] == "allow"
    st = w.cli_json("status", "--repo", "hard", "--human", "bob")
    assert st["humans"] == {"bob": {"alg": alg, "public": made_key["public"], "recovery": None, "counts_as": "bob"}}

    verified = w.cli("audit", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True


def test_no_device_is_a_usage_error_that_reaches_no_worker(worker, tmp_path):
    """Without a device (no provider library, no FIDO key plugged in) enrolment fails with
    ssh-keygen's reason and exit 3, and no key file is left to sign with."""
    worker.env["SSH_SK_PROVIDER"] = str(tmp_path / "missing.so")
    res = worker.cli("human", "key", "--human", "bob", "--security-key", "ed25519", "--json")
    assert res.returncode == 3 and res.stdout == "" and "ssh-keygen -t ed25519-sk failed" in res.stderr, res.stderr
    assert not (Path(worker.env["LONCA_HUMANS"]) / "bob.sk").exists()


def test_a_file_key_rotates_to_a_security_key(repo_env, source_repo, sk_provider, tmp_path):
    """`lonca human rotate --security-key`: every repository takes the new key (signed with the
    file key), then the file key is removed and the security key signs, a presence-required
    approval included."""
    env, w = repo_env, repo_env.w
    w.env.update(SSH_SK_PROVIDER=str(sk_provider), LONCA_TEST_SK_COUNTER=str(tmp_path / "sk-counter"))
    humans = Path(w.env["LONCA_HUMANS"])
    w.cli_json("init", "other", "--import", str(source_repo))
    env.policy('[review]\nagent_changes = "human"\n')
    seq = pending_change(env, "lib/util.py", "helper", "def helper():\n    return 43\n")
    env.policy('[review]\nagent_changes = "human"\npresence_required = true\n')
    # a file key may still rotate to a key that proves presence while nobody holds one

    rotated = w.cli_json("human", "rotate", "--security-key", "ed25519")
    assert rotated["alg"] == "sk-ed25519" and [r["repo"] for r in rotated["repos"]] == ["demo", "other"]
    assert not (humans / "alice.key").exists() and (humans / "alice.sk").exists()
    for repo in ("demo", "other"):
        assert w.cli_json("status", "--repo", repo)["humans"]["alice"]["public"] == rotated["public"]
    approved = w.cli_json("approve", str(seq), "--repo", "demo")
    assert approved["decision"]["outcome"] == "allow"
    again = w.cli("human", "rotate", "--security-key", "p256", "--json")
    assert again.returncode == 3 and "already" in again.stderr
    assert w.cli("audit", "verify").returncode == 0
