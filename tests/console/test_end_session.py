"""A human ends an agent's session from the Sessions page (a signed cap.revoke): the token the
console showed once stops working at that entry, and the session's leases go with it."""
import re

import pytest
from playwright.sync_api import expect

from console.browser_steps import bootstrap, sign
from console.test_webauthn_console import token_of
from lonca.protocol import LoncaError


def test_end_a_session_from_the_sessions_page(stack, new_page, source_repo):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(source_repo))
    page.goto(console.url + "/r/demo/sessions")
    expect(page.locator("form[data-ceremony='cap.revoke']")).to_have_count(0)  # nothing to end yet
    ada = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="tidy billing"))
    bob = token_of(sign(page, "form[data-ceremony='session.start']", agent="bob", task="docs"))
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "double check", "ttl_ms": 600_000}, token=ada)
    page.reload()
    form = page.locator("form[data-ceremony='cap.revoke']")
    expect(form.locator("option")).to_have_count(2)
    ada_id = form.locator("option", has_text="(ada)").get_attribute("value")
    form.locator("select[name=session]").select_option(ada_id)
    # a blank reason is refused by the browser's own check before anything is signed
    result = sign(page, "form[data-ceremony='cap.revoke']", reason="its token leaked into a build log")
    assert f"end session {ada_id}" in result and "allow" in result
    page.wait_for_load_state()
    expect(page.locator("#sessions tr.over")).to_contain_text(ada_id)
    expect(page.locator("form[data-ceremony='cap.revoke'] option")).to_have_count(1)  # only bob's is left
    with worker.client() as c:
        with pytest.raises(LoncaError) as refused:
            c.call("session.heartbeat", token=ada)
        assert refused.value.code in ("session_inactive", "unauthenticated")
        c.call("session.heartbeat", token=bob)   # the other session goes on
        leases = c.call("status", repo="demo", token=bob)["leases"]
    assert not any(lease["session"] == ada_id for lease in leases)
    expect(page.locator("#sessions")).to_contain_text(re.compile(r"Nobody holds a lease"))
