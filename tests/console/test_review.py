"""An agent's escalated proposal, made over the socket by the test, reviewed in the browser:
approved with an assertion and watched integrating live; another rejected with a reason."""
import base64
import re

from playwright.sync_api import expect

from console.browser_steps import bootstrap, sign
from console.test_webauthn_console import shot, token_of
from lonca.protocol import claim_from_facts


def propose_config(c, agent: str, text: str) -> dict:
    """An edit of lonca.toml, a critical path: the policy escalates it to a human."""
    trunk = c.call("status", token=agent)["trunk"]
    files = [{"path": "lonca.toml", "content_b64": base64.b64encode(text.encode()).decode(), "mode": None}]
    facts = c.call("facts.preview", {"base": trunk, "files": files}, token=agent)["facts"]
    claim = claim_from_facts(facts, "share leases")
    return c.call("change.propose", {"change": None, "base": trunk, "files": files, "claim": claim}, token=agent)


def test_approve_then_integrate_live_and_reject(stack, new_page, source_repo):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(source_repo))
    page.goto(console.url + "/r/demo/sessions")
    agent = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="policy"))

    page.goto(console.url + "/r/demo/review")
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "lonca.toml#<file>", "kind": "edit"}],
                                 "intent": "share leases", "ttl_ms": 600_000}, token=agent)
        res = propose_config(c, agent, "[leases]\nshared = true\n")
    assert res["decision"]["outcome"] == "escalate"
    row = page.locator(f"#review tr:has-text('{res['change'][:12]}')")
    expect(row).to_contain_text("critical_path:lonca.toml")  # arrived live, no reload
    expect(row).to_contain_text("ada")
    shot(page, "review")

    row.locator("a").click()
    page.wait_for_url(re.compile(rf"/changes/{res['change']}$"))
    expect(page.locator("table.diff")).to_contain_text("shared = true")
    expect(page.locator("#change dd[data-status]")).to_have_text("pending")
    result = sign(page, "form[data-ceremony='approve']", note="fine")
    assert "allow" in result, result
    expect(page.locator("#change dd[data-status]")).to_have_text("integrated", timeout=30_000)  # live
    shot(page, "change")

    page.goto(console.url + "/r/demo/queue")
    expect(page.locator("[data-column=integrated]")).to_contain_text(res["change"][:12])
    shot(page, "queue")

    with worker.client() as c:
        second = propose_config(c, agent, "[leases]\nmax_hold_minutes = 5\n")
    page.goto(console.url + f"/r/demo/changes/{second['change']}")
    result = sign(page, "form[data-ceremony='reject']", reason="not now")
    assert "allow" in result, result
    expect(page.locator("#change dd[data-status]")).to_contain_text("rejected")
    expect(page.locator("#change")).to_contain_text("rejected: not now")

    # who holds what, counting down
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "double the fee", "ttl_ms": 600_000}, token=agent)
    page.goto(console.url + "/r/demo/sessions")
    lease = page.locator("#sessions tr:has-text('app.py#charge')")
    expect(lease).to_contain_text("double the fee")
    expect(lease).to_contain_text(re.compile(r"fee(9|10)m \d+s"))

    res = worker.cli("audit", "verify")
    assert res.returncode == 0, res.stderr
