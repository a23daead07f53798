"""A human's small edit of one file in real Chromium (issue 14, "Human changes"): the edit page
reads the file at trunk, the form is signed with the virtual authenticator as a change.propose the
worker prepared (human.prepare_change), and the change lands on trunk through the merge queue;
checked outside the console, in the store. axe-core finds nothing serious on the page."""
import re
import subprocess
import time

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import bootstrap, sign
from console.test_accessibility import VIEWPORTS, axe_source, violations  # noqa: F401 (axe_source: a fixture)

APP = "def charge(amount):\n    return amount * 2\n"


def trunk_file(worker, path: str, want: str, timeout: float = 30) -> str:
    """The file at the store's trunk once it holds `want` (the queue integrates within seconds)."""
    store = worker.home / "repos" / "demo.git"
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = subprocess.run(["git", "show", f"main:{path}"], cwd=store, capture_output=True, text=True).stdout
        if want in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"trunk's {path} is {text!r}")


def test_a_small_edit_in_the_browser_lands_on_trunk(stack, new_page, tmp_path, axe_source):  # noqa: F811
    worker, console = stack
    upstream = git_repo(tmp_path / "upstream", {"app.py": APP, "logo.bin": "\x00\x01binary"})
    page, _key = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(upstream))
    page.goto(console.url + "/r/demo/edit?path=app.py")
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Edit")
    expect(page.locator("#edit-content")).to_have_value(APP)

    page.fill("#edit-content", APP.replace("amount * 2", "amount * 3"))
    done = sign(page, "#edit", intent="triple the fee")
    assert "propose change" in done and "to app.py" in done and "allow" in done, done
    assert trunk_file(worker, "app.py", "amount * 3") == APP.replace("amount * 2", "amount * 3")

    # a new file, opened by its path
    page.goto(console.url + "/r/demo/edit")
    page.fill("#open-path", "docs/notes.md")
    page.click("#open-file button[type=submit]")
    expect(page.locator("#edit h2")).to_contain_text("a new file")
    page.fill("#edit-content", "# Notes\n\nFees tripled.\n")
    done = sign(page, "#edit", intent="note the fee")
    assert "allow" in done, done
    assert trunk_file(worker, "docs/notes.md", "Fees tripled") == "# Notes\n\nFees tripled.\n"

    # a critical path (lonca.toml by default) waits for an approval, on Review and the change page
    page.goto(console.url + "/r/demo/edit?path=lonca.toml")
    page.fill("#edit-content", "[leases]\nshared = true\n")
    done = sign(page, "#edit", intent="share leases")
    assert "escalate" in done and "critical_path:lonca.toml" in done, done
    change = re.search(r"propose change ([k-z]{12})", done)[1]
    page.goto(console.url + "/r/demo/review")
    row = page.locator(f"#review tr:has-text('{change}')")
    expect(row).to_contain_text("human:alice")
    row.locator("a").first.click()
    page.wait_for_url(re.compile(rf"/changes/{change}"))
    expect(page.locator("table.diff")).to_contain_text("shared = true")
    assert "allow" in sign(page, "form[data-ceremony='approve']", note="mine, on purpose")
    expect(page.locator("#change dd[data-status]")).to_have_text("integrated", timeout=30_000)
    assert "shared = true" in trunk_file(worker, "lonca.toml", "shared = true")

    # a file that is no text is not edited here
    page.goto(console.url + "/r/demo/edit?path=logo.bin")
    expect(page.locator("main [role=alert]")).to_contain_text("lonca propose")
    expect(page.locator("#edit")).to_have_count(0)

    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        page.goto(console.url + "/r/demo/edit?path=app.py")
        assert violations(page, axe_source) == [], vp
