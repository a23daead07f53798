"""Review that keeps the reviewer's state (issue 12): heartbeats redraw nothing on a change page,
an update replaces only the parts it changed (an opened check log stays open), a decision form
for a version that is no longer the one waiting is disabled the moment that happens, two versions
can be compared, and a reviewer's signed comment reaches the agent and shows, on the next
version, as resolved or open."""
import base64
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import agent_session, sign
from console.test_webauthn_console import shot
from lonca.protocol import claim_from_facts

POLICY = '[review]\nagent_changes = "human"\n\n[verification]\ntests = ["python3", "-c", "print(\'tests ran\')"]\n'
APP = "def charge(amount):\n    return amount * 2\n"
UTIL = "def fee(x):\n    return x\n"


def propose(c, agent: str, files: dict[str, str], change: str | None = None) -> dict:
    trunk = c.call("status", token=agent)["trunk"]
    wire = [{"path": p, "content_b64": base64.b64encode(t.encode()).decode(), "mode": None} for p, t in files.items()]
    facts = c.call("facts.preview", {"base": trunk, "files": wire}, token=agent)["facts"]
    return c.call("change.propose", {"change": change, "base": trunk, "files": wire,
                                     "claim": claim_from_facts(facts, "round the fee")}, token=agent)


def start(stack, new_page, tmp_path, policy: str = POLICY):
    """alice's repository with a policy (by default one that sends agent changes to review), and
    an agent session holding app.py#charge and util.py#fee."""
    worker, console = stack
    src = git_repo(tmp_path / "src", {"app.py": APP, "util.py": UTIL, "lonca.toml": policy})
    page, _ = new_page()
    agent = agent_session(page, console, src, "fees")
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}, {"symbol": "util.py#fee", "kind": "edit"}],
                                 "intent": "round the fee", "ttl_ms": 600_000}, token=agent)
    return worker, console, page, agent


def count_entries(page) -> None:
    """Count, in the page, the log entries the stream delivered, by op."""
    page.evaluate("""() => { window.seen = {};
        document.body.addEventListener('lonca:log', (e) => { seen[e.detail.op] = (seen[e.detail.op] || 0) + 1; }); }""")


def test_an_opened_check_log_survives_heartbeats_and_updates(stack, new_page, tmp_path):
    worker, console, page, agent = start(stack, new_page, tmp_path)
    with worker.client() as c:
        ch = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
    page.goto(console.url + f"/r/demo/changes/{ch['change']}")
    assert "allow" in sign(page, "form[data-ceremony='approve']", note="fine")
    expect(page.locator("#change dd[data-status]")).to_have_text("integrated", timeout=30_000)
    log = page.locator("#part-evidence details.evidence").first
    expect(log).to_contain_text("tests")
    expect(log).not_to_have_attribute("open", "")          # a passed check's log starts closed
    log.locator("summary").click()
    expect(log.locator("pre.tail")).to_contain_text("tests ran")

    fragments = []
    page.on("request", lambda r: fragments.append(r.url) if r.headers.get("hx-request") else None)
    count_entries(page)
    # mark the parts' nodes: a part that is redrawn is a new node without the mark
    page.evaluate("() => document.querySelectorAll('#change > [data-part]').forEach((p) => { p.kept = true; })")
    with worker.client() as c:
        for _ in range(50):
            c.call("session.heartbeat", {}, token=agent)
    page.wait_for_function("() => (window.seen.observe || 0) >= 50")
    assert fragments == []                                  # heartbeats cost the open page nothing
    expect(log).to_have_attribute("open", "")

    # an entry that changes what the page shows: a new lease of the change's session; only the
    # leases part is drawn again, and the opened log stays open
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "more fees", "ttl_ms": 600_000}, token=agent)
    expect(page.locator("#part-leases")).to_contain_text("more fees")
    assert len(fragments) >= 1
    kept = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('#change > [data-part]')].map((p) => [p.id, !!p.kept]))")
    assert kept["part-leases"] is False
    assert kept["part-evidence"] and kept["part-diff"] and kept["part-timeline"], kept
    expect(log).to_have_attribute("open", "")
    expect(log.locator("pre.tail")).to_contain_text("tests ran")


def test_a_stale_form_is_disabled_live_and_versions_compare(stack, new_page, tmp_path):
    worker, console, page, agent = start(stack, new_page, tmp_path)
    with worker.client() as c:
        v1 = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
    page.goto(console.url + f"/r/demo/changes/{v1['change']}")
    expect(page.locator("#part-versions")).to_contain_text("One version so far")
    page.fill("form[data-ceremony='approve'] [name=note]", "looks right")
    with worker.client() as c:
        v2 = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2, 2)\n"}, change=v1["change"])
    decide = page.locator("section.decide")
    expect(decide.locator(".stale")).to_contain_text(f"Version 2 arrived (entry #{v2['seq']})")
    expect(decide.locator("form[data-ceremony='approve'] button[type=submit]")).to_be_disabled()
    expect(decide.locator("form[data-ceremony='reject'] textarea")).to_be_disabled()
    expect(decide.locator("form[data-ceremony='approve'] [name=note]")).to_have_value("looks right")   # kept

    # the reloaded page signs for version 2; version 1 and 2 compared on the server
    page.reload()
    expect(decide.locator(".stale")).to_be_hidden()
    expect(decide.locator("form[data-ceremony='approve'] button[type=submit]")).to_be_enabled()
    page.select_option("#compare-from", "1")
    page.select_option("#compare-to", "2")
    page.click("form.compare button[type=submit]")
    page.wait_for_url(re.compile(r"/compare\?from=1&to=2$"))
    expect(page.locator("h1")).to_contain_text("version 1 → 2")
    diff = page.locator("section.file[data-path='app.py'] table.diff")
    expect(diff.locator("tr.del")).to_contain_text("return round(amount * 2)")
    expect(diff.locator("tr.add")).to_contain_text("return round(amount * 2, 2)")
    expect(page.locator("section.file")).to_have_count(1)                # lonca.toml, util.py: the same
    page.goto(page.url.replace("from=1&to=2", "from=1&to=9"))
    expect(page.locator("main")).to_contain_text("choose two versions of this change, 1 to 2")

    # the change leaves review (withdrawn): the open page's forms are disabled with the reason
    page.goto(console.url + f"/r/demo/changes/{v1['change']}")
    with worker.client() as c:
        c.call("change.withdraw", {"change": v1["change"]}, token=agent)
    expect(decide.locator(".stale")).to_contain_text("The change left review: it is withdrawn now")
    expect(decide.locator("form[data-ceremony='comment'] button[type=submit]")).to_be_disabled()


def test_a_comment_reaches_the_agent_and_shows_resolved_or_open(stack, new_page, tmp_path):
    worker, console, page, agent = start(stack, new_page, tmp_path)
    first = {"app.py": "def charge(amount):\n    return round(amount * 2)\n", "util.py": "def fee(x):\n    return x + 1\n"}
    with worker.client() as c:
        v1 = propose(c, agent, first)
        before = c.call("inbox", {}, token=agent)
    assert [e for e in before["events"] if e["kind"] == "comment"] == []
    page.goto(console.url + f"/r/demo/changes/{v1['change']}")
    # a file list, and the diff side by side (old left, new right), kept by the live updates
    files = page.locator("#part-diff nav.file-list a")
    expect(files).to_have_count(2)
    files.nth(1).click()
    page.wait_for_url(re.compile(r"#file-2$"))
    page.get_by_role("link", name="side by side").click()
    page.wait_for_url(re.compile(r"\?view=split$"))
    row = page.locator("#part-diff section.file[data-path='app.py'] table.diff.split tr:has(td.del)")
    expect(row.locator("td.del")).to_contain_text("return amount * 2")
    expect(row.locator("td.add")).to_contain_text("return round(amount * 2)")
    row.scroll_into_view_if_needed()
    shot(page, "change-split")

    # a line of the diff: its number fills the form; the comment asks for changes
    page.click("#part-diff section.file[data-path='app.py'] a[data-line='2']")
    form = page.locator("form[data-ceremony='comment']")
    expect(form.locator("[name=path]")).to_have_value("app.py")
    expect(form.locator("[name=line]")).to_have_value("2")
    expect(form.locator("[name=text]")).to_be_focused()
    form.locator("[name=request_changes]").check()
    assert "allow" in sign(page, "form[data-ceremony='comment']", text="round to cents, not to units")
    # a symbol of the diff: the comment names it
    page.click("#part-diff section.file[data-path='util.py'] a[data-symbol]")
    expect(form.locator("[name=symbol]")).to_have_value(re.compile("fee"))
    expect(form.locator("[name=line]")).to_have_value("")
    form.locator("[name=request_changes]").uncheck()
    assert "allow" in sign(page, "form[data-ceremony='comment']", text="why one more?")
    comments = page.locator("#part-comments li[data-comment]")
    expect(comments).to_have_count(2)                                      # live
    expect(comments.first).to_contain_text("changes requested by human:alice on version 1")
    expect(page.locator("#part-diff table.diff.split")).to_have_count(2)   # the live refresh kept the view

    with worker.client() as c:
        inbox = c.call("inbox", {}, token=agent)
        events = c.call("events", {"from": None}, token=agent)["events"]
    told = [e for e in inbox["events"] if e["kind"] == "comment"]
    assert [(e["path"], e["line"], e["request_changes"], e["body"]) for e in told] == [
        ("app.py", 2, True, "round to cents, not to units"), ("util.py", None, False, "why one more?")]
    assert told[1]["symbol"].endswith("fee") and told[0]["change"] == v1["change"] and told[0]["human"] == "alice"
    assert "A human reviewer (human:alice) asks for changes on your change" in inbox["text"]
    assert "round to cents, not to units" in inbox["text"]
    assert [e["body"] for e in events if e["kind"] == "comment"] == ["round to cents, not to units", "why one more?"]
    with worker.client() as c:
        assert [e for e in c.call("inbox", {}, token=agent)["events"] if e["kind"] == "comment"] == []   # told once

    # version 2 answers on app.py and leaves util.py as it was
    with worker.client() as c:
        propose(c, agent, {**first, "app.py": "def charge(amount):\n    return round(amount * 2, 2)\n"}, change=v1["change"])
    page.reload()
    expect(comments.nth(0)).to_have_attribute("data-state", "resolved")
    expect(comments.nth(0)).to_contain_text("resolved: version 2 changed this file")
    expect(comments.nth(1)).to_have_attribute("data-state", "open")
    expect(comments.nth(1)).to_contain_text("open: version 2 left this file as it was")
    timeline = page.locator("#part-timeline")
    expect(timeline.locator("[data-kind=commented]")).to_have_count(2)
    shot(page, "change-comments")


def test_a_failed_check_shows_its_message_and_log(stack, new_page, tmp_path):
    worker, console = stack
    policy = '[verification]\ntests = ["python3", "-c", "import sys; print(\'fee rounding test failed\'); sys.exit(3)"]\n'
    src = git_repo(tmp_path / "src", {"app.py": APP, "lonca.toml": policy})
    page, _ = new_page()
    agent = agent_session(page, console, src, "fees")
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "round the fee", "ttl_ms": 600_000}, token=agent)
        ch = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
    page.goto(console.url + f"/r/demo/changes/{ch['change']}")
    expect(page.locator("#change dd[data-status]")).to_contain_text("rejected", timeout=30_000)     # live
    failed = page.locator("#part-evidence details.evidence.fail")
    expect(failed).to_have_attribute("open", "")
    expect(failed.locator("summary")).to_contain_text(re.compile(r"tests: fail in \d+ ms, exit 3"))
    expect(failed.locator("pre.tail")).to_contain_text("fee rounding test failed")
    expect(page.locator("#part-timeline [data-kind='not integrated']")).to_contain_text(re.compile(r"tests fail in \d+ ms \(exit 3\)"))


def test_checks_run_before_the_decision_and_show_live(stack, new_page, tmp_path):
    worker, console = stack
    policy = ('[review]\nagent_changes = "human"\nchecks_before_decision = true\n\n[verification]\n'
              'tests = ["python3", "-c", "import sys; t = open(\'app.py\').read(); print(\'checked\', len(t)); sys.exit(0 if \'round\' in t else 4)"]\n')
    src = git_repo(tmp_path / "src", {"app.py": APP, "lonca.toml": policy})
    page, _ = new_page()
    agent = agent_session(page, console, src, "fees")
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "app.py#charge", "kind": "edit"}],
                                 "intent": "round the fee", "ttl_ms": 600_000}, token=agent)
        v1 = propose(c, agent, {"app.py": "def charge(amount):\n    return amount * 3\n"})
    page.goto(console.url + f"/r/demo/changes/{v1['change']}")
    part = page.locator("#part-evidence")
    # version 1 fails its tests while it waits: the reviewer sees the exit and the output, live
    failed = part.locator("details[id^=review-check].fail")
    expect(failed).to_have_attribute("open", "", timeout=30_000)
    expect(failed.locator("summary")).to_contain_text(re.compile(r"tests: fail in \d+ ms, exit 4"))
    expect(failed.locator("pre.tail")).to_contain_text("checked 42")
    expect(part).to_contain_text("This version's checks")
    expect(page.locator("#change dd[data-status]")).to_have_text("pending")          # still the human's call
    # version 2 passes; the timeline tells both
    with worker.client() as c:
        propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"}, change=v1["change"])
        rec = c.call("change.get", {"change": v1["change"]}, token=agent)
    passed = part.locator("details[id^=review-check].pass")
    expect(passed).to_have_count(1, timeout=30_000)
    expect(passed).not_to_have_attribute("open", "")
    passed.locator("summary").click()
    expect(passed.locator("pre.tail")).to_contain_text("checked")
    checked = page.locator("#part-timeline [data-kind=checked]")
    expect(checked).to_have_count(2)
    expect(checked.nth(0)).to_contain_text(re.compile(r"version 1 while it waits: not all passed.*tests fail in \d+ ms \(exit 4\)", re.S))
    expect(checked.nth(1)).to_contain_text("version 2 while it waits: all passed")
    assert rec["version"] == 2
