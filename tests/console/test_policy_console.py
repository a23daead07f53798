"""A policy update from the console: the worker writes the policy commit, the human signs the
policy.update over it with the key, and status shows the new policy's checks."""
from playwright.sync_api import expect

from console.browser_steps import bootstrap, sign

CONFIG = '[verification]\nchecks = { lint = ["true"] }\n'


def test_policy_update_signed_in_the_browser(stack, new_page):
    worker, console = stack
    page, _key = new_page()
    bootstrap(page, console, "alice", "demo")
    page.goto(console.url + "/repos")
    page.locator("details.policy summary").click()
    expect(page.locator("details.policy")).to_contain_text("none, the defaults hold")
    result = sign(page, "form[data-ceremony='policy.update']", config=CONFIG)
    assert "put policy" in result and "allow" in result
    page.goto(console.url + "/repos")
    page.locator("details.policy summary").click()
    expect(page.locator("textarea[name=config]")).to_have_value(CONFIG)
    refused = sign(page, "form[data-ceremony='policy.update']", config="[nonsense]\nx = 1\n")
    assert "not a setting Lonca knows" in refused
    res = worker.cli("audit", "verify")
    assert res.returncode == 0, res.stderr
