"""A cloned authenticator on the security page (issue 14): bob's passkey signs with a sign count
that went back (what a copy of it does), the worker refuses it and records a cloned_authenticator
event naming bob; alice, on the security page, clicks "Revoke this key" and signs the
human.revoke; every session of bob's key ends, in the browser too, and the log verifies offline."""
import re

from playwright.sync_api import expect

from console.browser_steps import bootstrap, enrol, login, sign


def test_revoke_a_cloned_key_from_the_security_page(stack, new_page):
    worker, console = stack
    alice, _ = new_page()
    bootstrap(alice, console, "alice", "demo")
    bob, bob_key = new_page()
    enrol(bob, console, "bob")
    alice.goto(console.url + "/repos")
    with alice.expect_navigation():  # the signed form reloads the page: let it, before going on
        assert "allow" in sign(alice, "form.enrol-request")
    login(bob, console, "bob")
    bob.wait_for_url(re.compile(r"/r/demo/review$"))

    # the copy signs: its count is behind the one the worker saw
    bob.goto(console.url + "/repos")
    bob_key.set_sign_count(0)
    refused = sign(bob, "form[data-ceremony='freeze']", reason="from the copy")
    assert "bad_human_signature: the authenticator's sign count went back" in refused, refused

    alice.goto(console.url + "/security")
    expect(alice.locator("#security")).to_contain_text("cloned_authenticator")
    offer = alice.locator("[data-cloned='demo/bob']")
    expect(offer).to_contain_text("a copy of the key may be in use")
    result = sign(alice, "[data-cloned='demo/bob'] form.revoke-key")
    assert "revoke the key of bob in demo: cloned authenticator: allow" in result, result

    alice.goto(console.url + "/security")  # revoked: nothing left to offer
    expect(alice.locator("#security")).to_contain_text("cloned_authenticator")
    expect(alice.locator("[data-cloned]")).to_have_count(0)

    # bob's session ended with his key: the console sends him to log in, where his key is refused
    bob.goto(console.url + "/repos")
    expect(bob).to_have_url(re.compile(r"/login"))
    alice.goto(console.url + "/repos")
    expect(alice.locator("[data-repo=demo]")).not_to_contain_text("bob")
    assert worker.cli("audit", "verify").returncode == 0
