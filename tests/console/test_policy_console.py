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


def test_policy_cedar_from_the_console(stack, new_page):
    """policy.cedar beside lonca.toml in the same signed update: a syntax error is refused naming
    its line, a forbid then denies a session start signed on the sessions page, and the form shows
    the policy.cedar in force."""
    worker, console = stack
    page, _key = new_page()
    bootstrap(page, console, "alice", "demo")
    page.goto(console.url + "/repos")
    page.locator("details.policy summary").click()
    refused = sign(page, "form[data-ceremony='policy.update']", config=CONFIG,
                   cedar="permit(principal, action, resource);\nforbid(principal, action, resource) when { &&& };")
    assert "policy.cedar line 2: invalid token" in refused, refused
    cedar = ('permit(principal, action, resource);\n@id("no-interns")\nforbid(principal, action == Lonca::Action::"session.start", '
             'resource);\n')
    assert "allow" in sign(page, "form[data-ceremony='policy.update']", config=CONFIG, cedar=cedar)
    page.goto(console.url + "/repos")
    page.locator("details.policy summary").click()
    expect(page.locator("textarea[name=cedar]")).to_have_value(cedar)
    page.goto(console.url + "/r/demo/sessions")
    denied = sign(page, "form[data-ceremony='session.start']", agent="ada", task="fees")
    assert "deny" in denied and "policy_forbid:no-interns" in denied and "token" not in denied.lower(), denied
