"""Smaller things from issue 12: the nav keeps its links on pages of no repository, /favicon.ico
answers, and a repository the human may not read answers 403 with a live stream that stops
instead of reconnecting forever."""
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import bootstrap, sign


def test_nav_links_favicon_and_a_forbidden_repository(stack, new_page, tmp_path):
    worker, console = stack
    src = git_repo(tmp_path / "src", {"app.py": "x = 1\n"})
    page, _ = new_page()
    bootstrap(page, console, "carol", "demo", import_from=str(src))

    for path in ("/repos", "/security", "/keys"):
        page.goto(console.url + path)
        nav = page.locator("nav[aria-label=main]")
        for name, target in (("Review", "review"), ("Queue", "queue"), ("Sessions", "sessions"), ("Log", "log")):
            expect(nav.get_by_role("link", name=name, exact=True)).to_have_attribute("href", f"/r/demo/{target}")
    page.goto(console.url + "/security")
    page.locator("nav[aria-label=main]").get_by_role("link", name="Queue", exact=True).click()
    page.wait_for_url(re.compile(r"/r/demo/queue$"))
    expect(page.locator("h1")).to_have_text("Merge queue")

    icon = page.request.get(console.url + "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.body().startswith(b"<svg")

    # alice's repository, which carol is not enrolled in: carol enrols alice's file key in demo,
    # and alice, enrolled, creates another repository from the CLI
    public = worker.cli("human", "key", "--human", "alice", check=True).stdout.strip()
    page.goto(console.url + "/keys")
    assert "allow" in sign(page, "#enrol-file-key", human="alice", public=public)
    worker.cli_json("init", "other", "--import", str(git_repo(tmp_path / "other", {"b.py": "y = 2\n"})))
    streams = []
    page.on("request", lambda r: streams.append(r.url) if "/live/other" in r.url else None)
    answer = page.goto(console.url + "/r/other/review")
    assert answer.status == 403
    expect(page.locator("#live-status")).to_contain_text("Live updates stopped", timeout=10_000)
    page.wait_for_timeout(4000)          # an EventSource retries within about 3 s by default
    assert len(streams) == 1, streams
