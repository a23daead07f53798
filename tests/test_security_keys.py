"""FIDO security keys used from the CLI (issue 14; seed 001, "human key" and "human signature"):
sk-ed25519 and sk-p256 keys enrol, their SSHSIG blobs log in and sign operations through
human.submit over the real worker, `lonca audit verify` re-checks them offline, and every
malformation of the blob is refused bad_human_signature with nothing logged."""
import base64
import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from conftest import git_repo
from sshsig_builder import SecurityKey

from helpers import human_key, init_repo, login
from lonca import humansig, sshsig
from lonca.protocol import LoncaError


@pytest.fixture
def database_url():
    """Signatures are checked before any store is written: one store is enough here."""
    return None


def enroll_op(name: str) -> dict:
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"op": "human.enroll", "human": name, "key": {"alg": "ed25519", "public": raw.hex()}}


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


@pytest.mark.parametrize("kind", ["sk-ed25519", "sk-p256"])
def test_a_security_key_signs_over_the_worker_and_each_malformation_is_refused(worker, monkeypatch, kind):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    alice, carol = human_key("alice"), SecurityKey("carol", kind)
    with worker.client() as c:
        init_repo(c, alice, "demo")
        token = login(c, alice)
        op = {"op": "human.enroll", "human": "carol", "key": carol.public}
        c.call("human.submit", {"op": op, "sig": alice.sign_op("demo", op)}, repo="demo", token=token)
        ctoken = c.call("human.login", {"sig": carol.sign_login("demo", 3_600_000), "ttl_ms": 3_600_000},
                        repo="demo")["token"]

        def submit(op: dict, **how) -> dict:
            return c.call("human.submit", {"op": op, "sig": carol.sign_op("demo", op, **how)}, repo="demo", token=ctoken)

        assert submit(enroll_op("x1"))["seq"]
        assert submit(enroll_op("x2"), hash_alg=b"sha256")["seq"]  # ssh-keygen may hash with either
        before = c.call("status", repo="demo", token=ctoken)["next_seq"]
        other = SecurityKey("carol", kind)
        bad = {  # what is wrong -> what the refusal says
            "wrong namespace": ({"namespace": b"file"}, "namespace is not lonca"),
            "wrong magic": ({"magic": b"SSHSIH"}, "not an SSHSIG of version 1"),
            "wrong version": ({"version": 2}, "not an SSHSIG of version 1"),
            "reserved field not empty": ({"reserved": b"x"}, "reserved field"),
            "user presence clear": ({"flags": 0x04}, "user presence"),
            "counter going back": ({"counter": 1}, "sign count went back"),
            "counter standing still": ({"counter": carol.counter}, "sign count went back"),
            "unknown hash alg": ({"hash_alg": b"sha384"}, "neither sha512 nor sha256"),
            "hash alg lying": ({"hash_alg": b"sha512", "digest_alg": b"sha256"}, "does not verify"),
            "wrong key": ({"signer": other}, "does not verify"),
        }
        for what, (how, says) in bad.items():
            e = refusal(lambda: submit(enroll_op("x3"), **how))
            assert e.code == "denied" and e.message.startswith("bad_human_signature") and says in e.message, (what, e)

        def submit_raw(transform) -> dict:
            op = enroll_op("x3")
            sig = carol.sign_op("demo", op)
            return c.call("human.submit", {"op": op, "sig": {**sig, "sig": transform(sig["sig"])}}, repo="demo", token=ctoken)
        for what, transform in {"truncated": lambda h: h[:-2], "a byte more": lambda h: h + "00",
                                "empty": lambda h: "", "not hex": lambda h: h[:-1] + "z"}.items():
            e = refusal(lambda: submit_raw(transform))
            assert e.code == "denied" and e.message.startswith("bad_human_signature"), (what, e)
        # another key named in the blob, even one holding the same point, is not the enrolled key
        other_app = SecurityKey("carol", kind, application=b"ssh:")
        other_app.private, other_app.point = carol.private, carol.point
        e = refusal(lambda: c.call("human.submit", {"op": (op := enroll_op("x3")), "sig": other_app.sign_op("demo", op)},
                                   repo="demo", token=ctoken))
        assert e.message.startswith("bad_human_signature"), e
        assert c.call("status", repo="demo", token=ctoken)["next_seq"] == before  # nothing logged

        assert submit(enroll_op("x3"))["seq"] == before  # the key still works, its counter moved on
    assert worker.cli("audit", "verify").returncode == 0


def test_security_keys_enrol_only_as_real_points(worker, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    p256 = SecurityKey("dave", "sk-p256").point
    with worker.client() as c:
        for key in ({"alg": "sk-p256", "public": "02" + p256[1:33].hex() + "00" * 32},  # not uncompressed
                    {"alg": "sk-p256", "public": "04" + "00" * 64},  # off the curve
                    {"alg": "sk-p256", "public": p256[:33].hex()},  # compressed length
                    {"alg": "sk-ed25519", "public": "00" * 32},  # small order
                    {"alg": "sk-ed25519", "public": "ab" * 33}):
            e = refusal(lambda: c.call("repo.prepare_init", {"repo": "demo", "human": "dave", "human_key": key}))
            assert e.code == "invalid", (key, e)
        # a security key may be a repository's first key, and proves presence for the hardened profile
        dave = SecurityKey("dave", "sk-p256")
        prepared = c.call("repo.prepare_init", {"repo": "demo", "human": "dave", "human_key": dave.public,
                                                "profile": "hardened"})
        c.call("repo.init", {"op": prepared["op"], "sig": dave.sign_op("demo", prepared["op"])})
        assert c.call("status", repo="demo", token=login(c, dave, repo="demo"))["humans"]["dave"]


def test_verification_is_the_same_offline():
    """humansig.verify (what `lonca audit verify` runs) agrees with the worker's check."""
    for kind in ("sk-ed25519", "sk-p256"):
        k = SecurityKey("k", kind)
        good = k.blob(b"m")
        assert humansig.verify(k.public, b"m", good.hex())
        assert not humansig.verify(k.public, b"n", good.hex())
        assert not humansig.verify(k.public, b"m", k.blob(b"m", flags=0).hex())
        assert not humansig.verify({"alg": kind, "public": SecurityKey("j", kind).point.hex()}, b"m", good.hex())


def armor(blob: bytes) -> str:
    b64 = base64.b64encode(blob).decode()
    return "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(b64[i:i + 70] for i in range(0, len(b64), 70)) \
        + "\n-----END SSH SIGNATURE-----\n"


@pytest.mark.parametrize("kind", ["sk-ed25519", "sk-p256"])
def test_openssh_itself_verifies_the_builders_blobs(tmp_path, kind):
    """The builder is checked against OpenSSH's own verifier (`ssh-keygen -Y verify`, which needs
    no device), so the blobs the worker accepts are the ones ssh-keygen makes, not a private
    dialect. Signing needs a FIDO device: ssh-keygen here says "device not found"."""
    assert shutil.which("ssh-keygen"), "OpenSSH's ssh-keygen (Debian openssh-client) is needed"
    k = SecurityKey("carol", kind)
    (tmp_path / "allowed").write_text(f"carol {k.key_type.decode()} {base64.b64encode(k.public_blob()).decode()}\n")

    def openssh_accepts(blob: bytes, message: bytes = b"intent") -> bool:
        (tmp_path / "sig").write_text(armor(blob))
        return subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(tmp_path / "allowed"), "-I", "carol",
                               "-n", "lonca", "-s", str(tmp_path / "sig")], input=message,
                              capture_output=True).returncode == 0
    for hash_alg in (b"sha512", b"sha256"):
        blob = k.blob(b"intent", hash_alg=hash_alg)
        assert openssh_accepts(blob) and humansig.verify(k.public, b"intent", blob.hex())
    # (user presence is Lonca's rule on top: ssh-keygen 9.2's -Y verify accepts a blob without it)
    for how in ({"namespace": b"file"}, {"signer": SecurityKey("x", kind)}, {"hash_alg": b"sha512", "digest_alg": b"sha256"}):
        blob = k.blob(b"intent", **how)
        assert not openssh_accepts(blob) and not humansig.verify(k.public, b"intent", blob.hex()), how


def test_the_cli_enrols_a_security_keys_pub_line(worker, tmp_path, monkeypatch):
    """`lonca human enrol NAME --public "<the .pub line>"`: what ssh-keygen -t ed25519-sk (or
    ecdsa-sk) -O application=ssh:lonca writes; a key of another application is refused, since
    its signatures could never verify here."""
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    worker.cli_json("init", "demo", "--import", str(git_repo(tmp_path / "src", {"a.py": "x = 1\n"})))
    for kind in ("sk-ed25519", "sk-p256"):
        k = SecurityKey(f"carol-{kind}", kind)
        line = f"{k.key_type.decode()} {base64.b64encode(k.public_blob()).decode()} carol@laptop"
        assert sshsig.key_from_openssh(line) == k.public
        worker.cli_json("human", "enrol", k.name, "--public", line, "--repo", "demo")
        assert worker.cli_json("status", "--repo", "demo")["humans"][k.name]["alg"] == kind
        other = SecurityKey("eve", kind, application=b"ssh:")
        line = f"{other.key_type.decode()} {base64.b64encode(other.public_blob()).decode()}"
        refused = worker.cli("human", "enrol", "eve", "--public", line, "--repo", "demo")
        assert refused.returncode != 0 and "application=ssh:lonca" in refused.stderr
