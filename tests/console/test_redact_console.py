"""redact in real Chromium: the Repositories page's form is signed with the virtual authenticator;
after it the change page lists the file as redacted instead of drawing its diff, and the Edit page
says the file is redacted instead of offering an empty editor. axe-core finds nothing serious."""
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import bootstrap, sign
from console.test_accessibility import VIEWPORTS, axe_source, violations  # noqa: F401 (a fixture)
from console.test_review_live import propose
from console.test_webauthn_console import token_of

SECRET = "API_KEY = 'hunter2'\n"


def test_redact_from_the_console_and_what_the_pages_show(stack, new_page, tmp_path, axe_source):  # noqa: F811
    worker, console = stack
    # the change waits for a human, so trunk keeps the secret for the Edit page
    src = git_repo(tmp_path / "src", {"settings.py": SECRET, "notes.txt": "notes\n",
                                      "lonca.toml": '[review]\nagent_changes = "human"\n'})
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(src))
    page.goto(console.url + "/r/demo/sessions")
    agent = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="settings"))
    with worker.client() as c:
        trunk = c.call("status", token=agent)["trunk"]
        blob = next(f["blob"] for f in c.call("tree", {"commit": trunk, "with_content": False, "paths": ["settings.py"]},
                                               token=agent))
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "settings.py#<file>", "kind": "edit"},
                                                        {"symbol": "notes.txt#<file>", "kind": "edit"}],
                                 "intent": "settings", "ttl_ms": 600_000}, token=agent)
        cid = propose(c, agent, {"settings.py": "API_KEY = None\n", "notes.txt": "more notes\n"})["change"]

    page.goto(console.url + "/repos")
    page.locator("details.redact summary").click()
    result = sign(page, "form[data-ceremony='redact']", blob=blob, reason="an API key was committed")
    assert "allow" in result, result
    with worker.client() as c:
        got = c.call("blobs", {"commit": trunk, "paths": ["settings.py"]}, token=agent)
        assert got[0]["content_b64"] is None

    page.goto(console.url + f"/r/demo/changes/{cid}")
    expect(page.get_by_text("Redacted: settings.py")).to_be_visible()
    expect(page.locator("section.file[data-path='notes.txt']")).to_have_count(1)
    expect(page.locator("section.file[data-path='settings.py']")).to_have_count(0)
    assert "hunter2" not in page.content()
    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        assert violations(page, axe_source) == []

    page.goto(console.url + "/r/demo/edit?path=settings.py")
    expect(page.locator("p.banner[role=alert]")).to_contain_text(re.compile("redacted"))
    assert "hunter2" not in page.content()
