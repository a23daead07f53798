"""Ed25519 public keys of small order (and non-canonical encodings) never enter (issue 12): the
all-zero key "verifies" the all-zero signature over anything, so the worker refuses such a key as
a repository's first human key, in a human.enroll, and as the Ed25519 key of a WebAuthn credential,
and humansig.verify refuses it too. Over the real socket."""
import cbor2
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from helpers import human_key, init_repo, login
from lonca import humansig, webauthn
from lonca.protocol import LoncaError

# The eight points of order dividing 8, canonically encoded (libsodium's blocklist and the
# same points with the sign bit of x set where x is not 0).
SMALL_ORDER = [
    "0000000000000000000000000000000000000000000000000000000000000000",  # order 4
    "0000000000000000000000000000000000000000000000000000000000000080",  # order 4
    "0100000000000000000000000000000000000000000000000000000000000000",  # the neutral element
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # order 2
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",  # order 8
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",  # order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",  # order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",  # order 8
]
NON_CANONICAL = [
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1
    "0100000000000000000000000000000000000000000000000000000000000080",  # x = 0 with its sign set
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
]


@pytest.fixture
def database_url():
    """Keys are refused before any store is written: one store is enough here."""
    return None


@pytest.fixture
def keyed(worker, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    return worker, human_key("alice")


def refusal(fn) -> LoncaError:
    with pytest.raises(LoncaError) as e:
        fn()
    return e.value


def test_small_order_keys_verify_nothing():
    # the library alone accepts these: the all-zero signature under the all-zero key for a
    # quarter of all messages (b"m8" is one), and (R = neutral, S = 0) under the neutral key for any
    zero, neutral = bytes(32), bytes.fromhex(SMALL_ORDER[2])
    forged = [(zero, bytes(64), b"m8"), (neutral, neutral + bytes(32), b"any message at all")]
    for public, sig, message in forged:
        Ed25519PublicKey.from_public_bytes(public).verify(sig, message)
        assert not humansig.verify({"alg": "ed25519", "public": public.hex()}, message, sig.hex())
    assert all(humansig.ed25519_key_problem(bytes.fromhex(k)) for k in SMALL_ORDER + NON_CANONICAL)


def test_the_worker_refuses_small_order_keys_where_keys_enter(keyed):
    worker, alice = keyed
    assert humansig.ed25519_key_problem(bytes.fromhex(alice.public["public"])) is None
    with worker.client() as c:
        for public in SMALL_ORDER + NON_CANONICAL:
            e = refusal(lambda: c.call("repo.prepare_init", {"repo": "demo", "human": "mallory",
                                                             "human_key": {"alg": "ed25519", "public": public}}))
            assert e.code == "invalid" and ("small order" in e.message or "canonically" in e.message), (public, e)

        # the Ed25519 key inside a WebAuthn credential is checked the same way
        for public in SMALL_ORDER:
            cose = cbor2.dumps({1: 1, 3: -8, -1: 6, -2: bytes.fromhex(public)})
            key = webauthn.make_key("webauthn-ed25519", cose, "AAAA", "localhost", "http://localhost:8765")
            e = refusal(lambda: c.call("repo.prepare_init", {"repo": "demo", "human": "mallory", "human_key": key}))
            assert e.code == "invalid" and "small order" in e.message, (public, e)

        init_repo(c, alice, "demo")
        token = login(c, alice)
        for public in SMALL_ORDER:
            op = {"op": "human.enroll", "human": "mallory", "key": {"alg": "ed25519", "public": public}}
            e = refusal(lambda: c.call("human.submit", {"op": op, "sig": alice.sign_op("demo", op)}, repo="demo", token=token))
            assert e.code == "invalid" and "small order" in e.message, (public, e)
        st = c.call("status", repo="demo", token=token)
        assert set(st["humans"]) == {"alice"}
