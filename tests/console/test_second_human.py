"""A second human: registers a key while the worker serves a repository, waits, is enrolled by the
first human's signed human.enroll, then logs in."""
import re

from playwright.sync_api import expect

from console.browser_steps import bootstrap, enrol, login, sign


def test_a_second_human_is_enrolled_by_the_first(stack, new_page):
    worker, console = stack
    alice, _ = new_page()
    bootstrap(alice, console, "alice", "demo")

    bob, _ = new_page()
    message = enrol(bob, console, "bob")
    assert "An enrolled human enrols you" in message
    fingerprint = re.search(r"fingerprint is ([0-9a-f ]{19})", message).group(1)
    login(bob, console, "bob")
    refused = bob.locator("#login [data-ceremony-result]")
    expect(refused).to_have_class(re.compile(r"\berror\b"))
    assert refused.inner_text().startswith("unauthenticated: bad_human_signature")

    alice.goto(console.url + "/repos")
    request = alice.locator("form.enrol-request")
    expect(request).to_contain_text(fingerprint)
    assert "enrol bob" in sign(alice, "form.enrol-request") and "allow" in request.inner_text()

    login(bob, console, "bob")
    bob.wait_for_url(re.compile(r"/r/demo/review$"))
    bob.goto(console.url + "/repos")
    expect(bob.locator("[data-repo=demo]")).to_contain_text("bob")
    assert worker.cli("audit", "verify").returncode == 0
