"""Review with context (issue 12): the change page says why a change waits in words, counts the
approvals so far with who gave them and their notes, and tells the change's story (each
version, approvals, rejections, checks, the commit it became), live."""
import base64
import json
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import bootstrap, sign
from console.test_webauthn_console import shot, token_of
from lonca.protocol import claim_from_facts

POLICY = '[review]\nagent_changes = "human"\napprovals = 2\ndistinct_humans = ["bob"]\n\n[verification]\ntests = ["python3", "-c", "print(\'tests ran\')"]\n'


def propose(c, agent: str, text: str, change: str | None = None) -> dict:
    trunk = c.call("status", token=agent)["trunk"]
    files = [{"path": "app.py", "content_b64": base64.b64encode(text.encode()).decode(), "mode": None}]
    facts = c.call("facts.preview", {"base": trunk, "files": files}, token=agent)["facts"]
    return c.call("change.propose", {"change": change, "base": trunk, "files": files,
                                     "claim": claim_from_facts(facts, "round the fee")}, token=agent)


def test_why_it_waits_approvals_so_far_and_the_timeline(stack, new_page, tmp_path):
    worker, console = stack
    src = git_repo(tmp_path / "src", {"app.py": "def charge(amount):\n    return amount * 2\n", "lonca.toml": POLICY})
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(src))
    # a second approver: bob's file key for the CLI, enrolled from the Keys page by alice; the
    # policy counts bob as a human of his own (distinct_humans), else he would count as alice
    public = worker.cli("human", "key", "--human", "bob", check=True).stdout.strip()
    page.goto(console.url + "/keys")
    assert "allow" in sign(page, "#enrol-file-key", public=public, human="bob")
    page.goto(console.url + "/r/demo/sessions")
    agent = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="fees"))

    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "round the fee", "ttl_ms": 600_000}, token=agent)
        v1 = propose(c, agent, "def charge(amount):\n    return round(amount * 2)\n")
        v2 = propose(c, agent, "def charge(amount):\n    return round(amount * 2, 2)\n", change=v1["change"])
    assert v2["change"] == v1["change"] and v2["decision"]["outcome"] == "escalate"
    change = v1["change"]

    page.goto(console.url + f"/r/demo/changes/{change}")
    why = page.locator("#change .why")
    expect(why).to_contain_text("Why it waits: a human decides")
    expect(why).to_contain_text("the policy has a human review every agent change")
    expect(why.locator(".approvals")).to_contain_text("0 of 2 approvals")
    timeline = page.locator("#change ol.timeline")
    expect(timeline.locator("[data-kind=proposed]")).to_have_count(2)
    expect(timeline.locator("[data-kind=proposed]").nth(1)).to_contain_text("version 2")

    # the first approval: counted, named, its note shown; the change still waits
    assert "allow" in sign(page, "form[data-ceremony='approve']", note="fine by me")
    expect(why.locator(".approvals")).to_contain_text("1 of 2 approvals")      # live, no reload
    expect(why.locator(".approvers")).to_contain_text("human:alice: “fine by me”")
    expect(page.locator("#change dd[data-status]")).to_have_text("pending")

    # the second, bob's from the CLI with his file key: the change integrates after its checks, live
    out = json.loads(worker.cli("approve", str(v2["seq"]), "--note", "ok too", "--human", "bob", "--repo", "demo",
                                "--json", check=True).stdout)
    assert out["decision"]["outcome"] == "allow"
    expect(page.locator("#change dd[data-status]")).to_have_text("integrated", timeout=30_000)
    expect(why).to_contain_text("Trunk took it as")
    expect(timeline.locator("[data-kind=approved]")).to_have_count(2)
    expect(timeline.locator("[data-kind=approved]").nth(1)).to_contain_text("human:bob: “ok too”")
    integrated = timeline.locator("[data-kind=integrated]")
    expect(integrated).to_contain_text(re.compile(r"as [0-9a-f]{12}"))
    expect(integrated).to_contain_text(re.compile(r"checks: tests pass"))
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "change-context")

    # a rejection: in the timeline and, in words, as the reason it stopped
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "round the fee", "ttl_ms": 600_000}, token=agent)
        other = propose(c, agent, "def charge(amount):\n    return amount * 3\n")
    page.goto(console.url + f"/r/demo/changes/{other['change']}")
    assert "allow" in sign(page, "form[data-ceremony='reject']", reason="triples the fee")
    expect(why).to_contain_text("a human rejected it: triples the fee")
    expect(timeline.locator("[data-kind=rejected]")).to_contain_text("human:alice: “triples the fee”")
