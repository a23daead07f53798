"""Enrolment requests against a flood and a squatter (issue 12): requests are rate-limited per
address and overall, bounded in number, a second request for a name shows beside the first
(never replacing it), and an enrolled human declines one in the console. The attacker registers
keys with a software authenticator over plain HTTP from loopback addresses of its own."""
import base64
import hashlib
import json
import re
import secrets

import cbor2
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from playwright.sync_api import expect

from lonca.console import enrolments, rate_limits
from console.browser_steps import bootstrap, enrol, login, sign


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def register(console, human: str, address: str, public: bytes | None = None, cred_id: bytes | None = None) -> httpx.Response:
    """A registration as a script makes it: attestation "none", a fresh Ed25519 credential (or
    the public key and credential id given: the same key sent again)."""
    url = console.url.replace("localhost", "127.0.0.1")
    with httpx.Client(base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address=address)) as c:
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', c.get("/enrol").text).group(1)
        begun = c.post("/webauthn/register/begin", json={"human": human}, headers={"X-CSRF-Token": csrf})
        assert begun.status_code == 200, begun.text
        options = begun.json()["options"]
        public = public or Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        cred_id = cred_id or secrets.token_bytes(16)
        auth_data = (hashlib.sha256(options["rp"]["id"].encode()).digest() + bytes([0x41]) + bytes(4) + bytes(16)
                     + len(cred_id).to_bytes(2, "big") + cred_id + cbor2.dumps({1: 1, 3: -8, -1: 6, -2: public}))
        client_data = json.dumps({"type": "webauthn.create", "challenge": options["challenge"], "origin": console.url,
                                  "crossOrigin": False}).encode()
        credential = {"id": b64url(cred_id), "rawId": b64url(cred_id), "type": "public-key", "clientExtensionResults": {},
                      "response": {"clientDataJSON": b64url(client_data),
                                   "attestationObject": b64url(cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data}))}}
        return c.post("/webauthn/register/finish", json={"credential": credential}, headers={"X-CSRF-Token": csrf})


def test_requests_are_rate_limited_never_replaced_and_can_be_declined(stack, new_page):
    worker, console = stack
    alice, _ = new_page()
    bootstrap(alice, console, "alice", "demo")

    # the real carol registers in her browser; a squatter then asks for the same name
    carol, _ = new_page()
    message = enrol(carol, console, "carol")
    real = re.search(r"fingerprint is ([0-9a-f ]{19})", message).group(1)
    squat = register(console, "carol", "127.0.0.2")
    assert squat.status_code == 200, squat.text
    fake = re.search(r"fingerprint is ([0-9a-f ]{19})", squat.json()["message"]).group(1)

    # one address: three requests in ten minutes, then refused; a request sent again with the
    # same key is the request already waiting, and spends nothing
    again = {"public": Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw,
                                                                             serialization.PublicFormat.Raw),
             "cred_id": secrets.token_bytes(16)}
    retries = [register(console, "spam", "127.0.0.3", **again) for _ in range(4)]
    assert [r.status_code for r in retries] == [200] * 4 and len({r.json()["message"] for r in retries}) == 1
    assert [register(console, f"spam{i}", "127.0.0.3").status_code for i in range(3)] == [200, 200, 429]
    # everyone: twenty in ten minutes (2 + 3 so far), then refused from a fresh address too
    for n in range(5):
        assert [register(console, f"bot{n}x{i}", f"127.0.1.{n}").status_code for i in range(3)] == [200] * 3
    refused = register(console, "latecomer", "127.0.2.1")
    assert refused.status_code == 429 and "at most 20 from everyone" in refused.json()["error"], refused.text

    # both carols show, with a warning; alice declines the squatter's by its fingerprint
    alice.goto(console.url + "/repos")
    requests = alice.locator("form.enrol-request", has_text="carol asks")
    expect(requests).to_have_count(2)
    expect(requests.first).to_contain_text("2 requests ask for the name carol")
    expect(requests.filter(has_text=fake)).to_contain_text("from 127.0.0.2")
    alice.locator("form.decline-request", has_text=fake).get_by_role("button").click()
    alice.wait_for_url(re.compile(r"/repos$"))
    expect(requests).to_have_count(1)
    expect(requests).to_contain_text(real)
    assert "enrol carol" in sign(alice, "form.enrol-request:has-text('carol asks')")
    login(carol, console, "carol")
    carol.wait_for_url(re.compile(r"/r/demo/review$"))

    # the security page shows the console's refusals and the decline
    alice.goto(console.url + "/security")
    events = alice.locator("#security .console-events")
    expect(events).to_contain_text("enrolment_declined")
    expect(events).to_contain_text(f"alice declined the request of carol (fingerprint {fake})")
    expect(events).to_contain_text("rate_limited")

    # a credential whose Ed25519 key has small order is no key: refused before any request exists
    forged = register(console, "mallory", "127.0.3.1", public=bytes(32))
    assert forged.status_code == 422 and "small order" in forged.json()["error"], forged.text


def test_requests_are_bounded_and_kept_in_order():
    store = enrolments.Enrolments()
    keys = [{"alg": "ed25519", "public": secrets.token_hex(32)} for _ in range(enrolments.KEPT + 1)]
    first = [store.add(f"h{i}", k, "127.0.0.1") for i, k in enumerate(keys[:enrolments.KEPT])]
    with pytest.raises(enrolments.Refused, match="declines some"):
        store.add("late", keys[-1], "127.0.0.1")
    assert [r.id for r in store.all()] == [r.id for r in first]  # nothing old pushed out
    assert store.add("h0", keys[0], "127.0.0.1") is first[0]  # the same key again is the same request

    assert store.waiting("h0", keys[0]) is first[0] and store.waiting("h0", keys[1]) is None

    named = enrolments.Enrolments()
    for i in range(enrolments.PER_NAME):
        named.add("bob", {"alg": "ed25519", "public": secrets.token_hex(32)}, "127.0.0.1")
    with pytest.raises(enrolments.Refused, match="3 enrolment requests for bob wait already"):
        named.add("bob", {"alg": "ed25519", "public": secrets.token_hex(32)}, "127.0.0.1")
    assert named.namesakes() == {"bob": 3}


def test_a_limit_without_an_overall_bound_counts_only_addresses():
    limit = rate_limits.RateLimit(per_client=2, window_ms=60_000)
    assert [limit.allow("a"), limit.allow("b"), limit.allow("a")] == [None, None, None]
    assert "at most 2 from one address" in limit.allow("a") and limit.allow("b") is None
    assert not limit._all  # nothing reads everyone's count: none is kept
    bounded = rate_limits.RateLimit(per_client=2, window_ms=60_000, overall=3)
    assert [bounded.allow(c) for c in "abc"] == [None, None, None]
    assert "at most 3 from everyone" in bounded.allow("d")
