"""RS256 authenticators (COSE -257, RSASSA-PKCS1-v1_5 with SHA-256; Windows Hello and older
security keys offer nothing else) enrol and sign as webauthn-rs256 keys (issue 12, "Smaller
things found"): registration through py_webauthn, then a repository bootstrapped by such a key,
its login and a signed write through the real worker, checked again by `lonca audit verify`."""
import secrets

import pytest

from helpers import Passkey, init_repo, login
from lonca import webauthn
from lonca.protocol import LoncaError


def test_an_rs256_registration_gives_a_webauthn_rs256_key():
    passkey = Passkey("alice", "webauthn-rs256")
    challenge = secrets.token_bytes(32)
    key = webauthn.key_from_registration(passkey.registration(challenge), challenge, Passkey.RP_ID,
                                         Passkey.ORIGIN, require_uv=True)
    assert key == passkey.public and key["alg"] == "webauthn-rs256"
    with pytest.raises(Exception):  # another challenge: not this ceremony's answer
        webauthn.key_from_registration(passkey.registration(challenge), secrets.token_bytes(32), Passkey.RP_ID,
                                       Passkey.ORIGIN, require_uv=True)


def test_an_rs256_key_shorter_than_2048_bits_is_refused():
    with pytest.raises(LoncaError, match="modulus has 1024 bits; at least 2048"):
        webauthn.credential(Passkey("alice", "webauthn-rs256", rsa_bits=1024).public)


def test_an_rs256_passkey_bootstraps_logs_in_and_signs_through_the_worker(worker, source_repo):
    c = worker.client()
    alice = Passkey("alice", "webauthn-rs256")
    init_repo(c, alice, "demo", import_from=str(source_repo))
    token = login(c, alice, repo="demo")
    st = c.call("status", repo="demo", token=token)
    assert st["humans"]["alice"]["alg"] == "webauthn-rs256", st["humans"]
    op = {"op": "freeze", "reason": "signed by an RS256 passkey"}
    c.call("human.submit", {"op": op, "sig": alice.sign_op("demo", op)}, repo="demo", token=token)
    assert c.call("status", repo="demo", token=token)["frozen"]
    # a signature by another RSA key under alice's name is refused
    mallory = Passkey("alice", "webauthn-rs256")
    op = {"op": "unfreeze", "reason": "not alice"}
    with pytest.raises(LoncaError) as refused:
        c.call("human.submit", {"op": op, "sig": mallory.sign_op("demo", op)}, repo="demo", token=token)
    assert "bad_human_signature" in str(refused.value), refused.value
    assert worker.cli("audit", "verify").returncode == 0


def test_a_database_made_with_the_short_token_key_column_holds_an_rs256_login(tmp_path, database_url):
    """tokens.key_public was VARCHAR(512); an RS256 key's public part is about 900 hex digits.
    A database made with the old column is widened when the worker opens it."""
    from sqlalchemy import create_engine
    from sqlmodel import Session

    from lonca.service import store
    url = database_url or f"sqlite:///{tmp_path / 'old.db'}"
    old = create_engine(url)
    with old.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE tokens (token_hash VARCHAR(64) PRIMARY KEY, kind VARCHAR(8) NOT NULL, "
                             "repo VARCHAR(64), session VARCHAR(64), human VARCHAR(64), key_alg VARCHAR(32), "
                             "key_public VARCHAR(512), expires_ms BIGINT NOT NULL, ended BOOLEAN NOT NULL)")
    old.dispose()
    key = Passkey("alice", "webauthn-rs256").public
    assert len(key["public"]) > 512
    engine = store.open_engine(url)
    try:
        with Session(engine) as s:
            s.add(store.TokenRow(token_hash="0" * 64, kind="human", human="alice", key_alg=key["alg"],
                                 key_public=key["public"], expires_ms=1))
            s.commit()
            assert s.get(store.TokenRow, "0" * 64).key_public == key["public"]
    finally:
        engine.dispose()
