"""The queue you can watch (issue 12): what is being verified and for how long, recent
integrations with their commits, the changes that stopped and why in words, and the day's plots
drawn on the server as SVG, all live."""
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import bootstrap, sign
from console.test_review_live import propose
from console.test_webauthn_console import shot, token_of
from console import test_review_live
from console.test_accessibility import VIEWPORTS, axe_source, violations  # noqa: F401 (a fixture)

POLICY = ('[review]\ncritical_paths = ["docs.md"]\n\n[verification]\n'
          'tests = ["python3", "-c", "import time; time.sleep(1.5); print(\'tests ran\')"]\n')


def test_the_queue_page_shows_the_line_integrations_stops_and_plots(stack, new_page, tmp_path):
    worker, console = stack
    src = git_repo(tmp_path / "src", {"app.py": test_review_live.APP, "docs.md": "# a\n", "lonca.toml": POLICY})
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(src))
    page.goto(console.url + "/r/demo/sessions")
    agent = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="fees"))
    page.goto(console.url + "/r/demo/queue")
    expect(page.locator("#queue .now")).to_contain_text("The queue is empty")
    expect(page.locator("#queue [data-day]")).to_contain_text("0 integrated")
    expect(page.locator("#queue svg.plot")).to_have_count(2)

    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"},
                                                         {"symbol": "docs.md#<file>", "kind": "edit"}],
                                 "intent": "fees", "ttl_ms": 600_000}, token=agent)
        first = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
    assert first["decision"]["outcome"] == "allow"
    # live: the change is verified (its checks take 1.5 s), with the time it has taken so far
    head = page.locator(f"#queue li[data-queued='{first['change']}']")
    expect(head).to_contain_text("verifying for")
    expect(head.locator("time[data-elapsed]")).to_have_text(re.compile(r"^\d+s$"))
    row = page.locator(f"#queue tr[data-integrated='{first['change']}']")
    expect(row).to_contain_text(re.compile(r"[0-9a-f]{12}"), timeout=30_000)
    expect(page.locator("#queue [data-day]")).to_contain_text(re.compile(r"1 integrated; from proposal to integration, median \d+ s"))
    expect(page.locator("#queue svg.plot[aria-label^='Integrations per hour']")).to_have_attribute(
        "aria-label", re.compile("1 in all"))
    expect(page.locator("#queue svg.plot rect")).to_have_count(1)
    expect(page.locator("#queue svg.plot circle")).to_have_count(2)          # the hour's median and p95

    # stopped: one rejected by a human with a reason, one withdrawn by its agent
    with worker.client() as c:
        doc = propose(c, agent, {"docs.md": "# a, again\n"})
    assert doc["decision"]["outcome"] == "escalate"
    page.goto(console.url + f"/r/demo/changes/{doc['change']}")
    assert "allow" in sign(page, "form[data-ceremony='reject']", reason="the docs stay")
    with worker.client() as c:
        gone = propose(c, agent, {"docs.md": "# a, once more\n"})
        c.call("change.withdraw", {"change": gone["change"]}, token=agent)
    page.goto(console.url + "/r/demo/queue")
    expect(page.locator("#queue tr[data-stopped='rejected']")).to_contain_text("a human rejected it: the docs stay")
    expect(page.locator("#queue tr[data-stopped='withdrawn']")).to_contain_text("its agent withdrew it")
    expect(page.locator("[data-column=integrated]")).to_contain_text(first["change"][:12])
    shot(page, "queue-watch")


# A check that prints over a few seconds, a token-shaped line among its output, and fails when
# the candidate holds bad.txt (so a batch with that file bisects).
SLOW_CHECK = ("import os, sys, time\n"
              "print('lonca_h_' + '0123456789abcdef' * 4, flush=True)\n"
              "for i in range(6):\n"
              "    print(f'tick {i}', flush=True)\n"
              "    time.sleep(0.6)\n"
              "sys.exit(1 if os.path.exists('bad.txt') else 0)\n")


def test_running_checks_show_their_output_elapsed_time_and_bisection_live(stack, new_page, tmp_path, axe_source):  # noqa: F811
    worker, console = stack
    policy = '[verification]\ntests = ["python3", "check.py"]\n'
    src = git_repo(tmp_path / "src", {"app.py": test_review_live.APP, "check.py": SLOW_CHECK, "lonca.toml": policy})
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(src))
    page.goto(console.url + "/r/demo/sessions")
    agent = token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="fees"))
    page.goto(console.url + "/r/demo/queue")
    expect(page.locator("#running")).to_contain_text("No check runs now")
    fragments: list[str] = []
    page.on("request", lambda r: fragments.append(r.url) if r.headers.get("hx-request") else None)

    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"},
                                                         {"symbol": "ok.txt#<file>", "kind": "edit"},
                                                         {"symbol": "bad.txt#<file>", "kind": "edit"}],
                                 "intent": "fees", "ttl_ms": 600_000}, token=agent)
        first = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
    assert first["decision"]["outcome"] == "allow"

    # the check runs: its output tail grows and its elapsed time moves, with no log entry between
    check = page.locator("#running li[data-state='running'] .check[data-result='running']")
    tail = check.locator("pre[data-tail]")
    expect(tail).to_contain_text("tick 0", timeout=20_000)
    early = tail.inner_text()
    assert "tick 5" not in early
    assert "0123456789abcdef" not in early and "lonca_…(hidden)" in early     # never a token
    elapsed = check.locator("time[data-elapsed]")
    before = elapsed.inner_text()
    # two more while it runs: they wait, and are verified together in the next round
    with worker.client() as c:
        good = propose(c, agent, {"ok.txt": "fine\n"})
        bad = propose(c, agent, {"bad.txt": "breaks the tests\n"})
    expect(tail).to_contain_text("tick 3")
    expect(elapsed).not_to_have_text(before)
    assert any("/queue/running" in u for u in fragments)     # the part polled; the page was not reloaded

    # the batch of two fails and is bisected, as it happens
    expect(page.locator(f"#running article[data-round='integrate'] h3 a[href$='{bad['change']}']")).to_have_count(1, timeout=20_000)
    expect(page.locator("#running li[data-candidate='1'][data-state='failed']")).to_have_count(1, timeout=20_000)
    expect(page.locator("#running [data-bisecting]")).to_be_visible()
    step = page.locator("#running li[data-candidate='2']")
    expect(step).to_contain_text("(bisection): 1 of the 2 changes")
    expect(step).to_contain_text(good["change"][:12])
    shot(page, "queue-bisecting")
    for vp in VIEWPORTS:      # the running part, tails and all, at both sizes
        page.set_viewport_size(vp)
        assert violations(page, axe_source) == []
    page.set_viewport_size(VIEWPORTS[0])

    # then the results: the good change integrated, the bad one failed, and nothing runs
    expect(page.locator(f"#queue tr[data-integrated='{good['change']}']")).to_have_count(1, timeout=30_000)
    expect(page.locator(f"#queue tr[data-stopped='failed'] a[href$='{bad['change']}']")).to_have_count(1)
    expect(page.locator("#running")).to_contain_text("No check runs now")
