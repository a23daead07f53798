"""Put a queued change first from its page (a signed priority op): the form shows only on a
queued change without a priority, signs, and the change then carries its priority_seq and lands."""
import time

from playwright.sync_api import expect

from console.browser_steps import sign
from console.test_review_live import propose, start

POLICY = '[verification]\ntests = ["python3", "-c", "import time; time.sleep(4)"]\n'


def test_put_a_queued_change_first(stack, new_page, tmp_path):
    worker, console, page, agent = start(stack, new_page, tmp_path, POLICY)
    with worker.client() as c:
        first = propose(c, agent, {"app.py": "def charge(amount):\n    return round(amount * 2)\n"})
        time.sleep(0.5)  # the queue is verifying `first` alone; the next one waits, queued
        second = propose(c, agent, {"util.py": "def fee(x):\n    return x + 1\n"})
    page.goto(console.url + f"/r/demo/changes/{second['change']}")
    result = sign(page, "form[data-ceremony='priority']")
    assert f"put change {second['change'][:12]} ahead of the queue" in result and "allow" in result
    with worker.client() as c:
        got = c.call("change.get", {"change": second["change"]}, token=agent)
    assert got["priority_seq"] is not None
    page.wait_for_load_state()
    expect(page.locator("form[data-ceremony='priority']")).to_have_count(0)  # reloaded: it has one now
    with worker.client() as c:
        for _ in range(300):
            st = {ch["change"]: ch["status"]["status"] for ch in c.call("status", token=agent)["changes"]}
            if st[first["change"]] == st[second["change"]] == "integrated":
                break
            time.sleep(0.1)
    assert st[first["change"]] == st[second["change"]] == "integrated"
    # an integrated change offers no priority
    page.goto(console.url + f"/r/demo/changes/{second['change']}")
    expect(page.locator("form[data-ceremony='priority']")).to_have_count(0)
