"""Expand context in the diff view (issue 12), as GitHub's "expand up/down" between hunks: a
click fetches more lines of the file at the change's version (htmx, no page reload), in the
unified and the side-by-side views, and the lines it brings keep their numbers on both sides,
pick a line for a comment, and leave axe-core with nothing serious at both sizes."""
import re

from playwright.sync_api import expect

from conftest import git_repo
from console.browser_steps import agent_session
from console.test_accessibility import VIEWPORTS, axe_source, violations  # noqa: F401 (a fixture)
from console.test_review_live import POLICY, propose
from console.test_webauthn_console import shot

OLD = "".join(f"line {i}\n" for i in range(1, 61))
# line 10 changed, line 50 removed: the new side is one line behind the old after it
NEW = OLD.replace("line 10\n", "line ten\n").replace("line 50\n", "")


def test_expanding_hidden_lines_in_both_views(stack, new_page, tmp_path, axe_source):  # noqa: F811
    worker, console = stack
    src = git_repo(tmp_path / "src", {"notes.txt": OLD, "lonca.toml": POLICY})
    page, _ = new_page()
    agent = agent_session(page, console, src, "notes")
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "notes.txt#<file>", "kind": "edit"}],
                                 "intent": "notes", "ttl_ms": 600_000}, token=agent)
        cid = propose(c, agent, {"notes.txt": NEW})["change"]
    page.goto(console.url + f"/r/demo/changes/{cid}")
    diff = page.locator("section.file[data-path='notes.txt'] table.diff")
    # hidden: 1-6 above the first hunk, 14-46 between (new numbers), 53 to the end
    expect(diff.locator("tr.gap")).to_have_count(3)
    expect(diff.locator("tr.gap").nth(1)).to_have_attribute("data-gap", "14-46")
    page.evaluate("() => { window.notReloaded = true; }")

    diff.locator("tr.gap[data-gap='14-46'] button[data-take='down']").click()
    expect(diff.locator("tr.gap[data-gap='34-46']")).to_have_count(1)
    row = diff.locator("tr.ctx", has_text="line 33")
    expect(row.locator("td.n")).to_have_text(["33", "33"])
    # the 13 left are shown at once: fewer than a step
    expect(diff.locator("tr.gap[data-gap='34-46'] button")).to_have_count(1)
    diff.locator("tr.gap[data-gap='34-46'] button[data-take='all']").click()
    expect(diff.locator("tr.gap[data-gap='34-46']")).to_have_count(0)
    expect(diff.locator("tr.ctx", has_text="line 46").locator("td.n")).to_have_text(["46", "46"])
    # after the removed line 50, the old side is one ahead: new 57 is old 58
    diff.locator("tr.gap[data-gap='53-0'] button[data-take='all']").click()
    expect(diff.locator("tr.ctx", has_text="line 58").locator("td.n")).to_have_text(["58", "57"])
    expect(diff.locator("tr.ctx", has_text="line 60").locator("td.n")).to_have_text(["60", "59"])
    expect(diff.locator("tr.gap")).to_have_count(1)
    # a line brought in picks a line for a comment like any other of the new side
    diff.locator("tr.ctx", has_text="line 20").locator("a[data-line='20']").click()
    expect(page.locator("#comment [name=line]")).to_have_value("20")
    assert page.evaluate("() => window.notReloaded") is True
    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        assert violations(page, axe_source) == []
    shot(page, "expand-unified")

    # side by side: four cells a row, old on the left
    page.set_viewport_size(VIEWPORTS[0])
    page.goto(console.url + f"/r/demo/changes/{cid}?view=split")
    page.evaluate("() => { window.notReloaded = true; }")
    diff = page.locator("section.file[data-path='notes.txt'] table.diff.split")
    diff.locator("tr.gap[data-gap='1-6'] button[data-take='all']").click()
    first = diff.locator("tr.ctx", has_text="line 2")
    expect(first.locator("td")).to_have_count(4)
    expect(first.locator("td.n")).to_have_text(["2", "2"])
    diff.locator("tr.gap[data-gap='53-0'] button[data-take='down']").click()
    expect(diff.locator("tr.ctx", has_text="line 60").locator("td.n")).to_have_text(["60", "59"])
    expect(diff.locator("tr.gap")).to_have_count(1)     # 14-46 is still hidden
    assert page.evaluate("() => window.notReloaded") is True
    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        assert violations(page, axe_source) == []
    shot(page, "expand-split")
    assert re.search(r"/changes/[k-z]{32}\?view=split$", page.url)


def test_a_large_diff_is_drawn_plain_then_its_colours_come_without_a_reload(stack, new_page, tmp_path):
    """Colouring 2,500 lines takes Pygments a second or more: the page does not wait for it."""
    worker, console = stack
    src = git_repo(tmp_path / "src", {"notes.txt": OLD, "lonca.toml": POLICY})
    page, _ = new_page()
    agent = agent_session(page, console, src, "big")
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(1250))
    with worker.client() as c:
        c.call("lease.acquire", {"set": None, "items": [{"symbol": "big.py#<file>", "kind": "edit"}],
                                 "intent": "big", "ttl_ms": 600_000}, token=agent)
        cid = propose(c, agent, {"big.py": text})["change"]
    url = console.url + f"/r/demo/changes/{cid}"
    with page.expect_response(url) as first:
        page.goto(url)
    html = first.value.text()       # the first drawing: plain, and it asks again a second after load
    assert "data-colouring" in html and '<span class="k">' not in html and html.count('<tr class="add">') == 2500
    page.evaluate("() => { window.notReloaded = true; }")
    diff = page.locator("section.file[data-path='big.py'] table.diff")
    expect(page.locator("#part-diff [data-colouring]")).to_have_count(0, timeout=30_000)
    expect(diff.locator("span.k").first).to_have_text("def")
    expect(diff.locator("span.nf").nth(1249)).to_have_text("f1249")
    assert page.evaluate("() => window.notReloaded") is True
