"""The console in a real Chromium with a virtual authenticator: enrol, create the first repository,
log in, sign operations, watch the pages follow the log live, and the refusals, each saying why."""
import json
import os
import re
from pathlib import Path

from playwright.sync_api import expect

from console.browser_steps import bootstrap, sign
from lonca import humansig

SHOTS = os.environ.get("LONCA_SCREENSHOTS")


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)


def logged(worker, repo: str) -> list[dict]:
    """The log's entries, read from the database as `lonca audit verify` reads them."""
    from sqlalchemy import create_engine, text
    engine = create_engine(f"sqlite:///{worker.home / 'lonca.db'}")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT entry FROM log_entries WHERE repo=:r ORDER BY seq"), {"r": repo}).scalars().all()
    engine.dispose()
    return [json.loads(r) for r in rows]


def token_of(console_page_result: str) -> str:
    return re.search(r"lonca_[0-9a-f]{64}", console_page_result).group(0)


def test_enrol_create_log_in_and_follow_the_log(stack, new_page, source_repo):
    worker, console = stack
    page, key = new_page()
    page.goto(console.url)
    page.wait_for_url(re.compile(r"/enrol$"))
    bootstrap(page, console, "alice", "demo", import_from=str(source_repo))
    expect(page.locator("#review")).to_contain_text("Nothing waits for a human in demo")
    shot(page, "review-empty")

    # an agent session, signed in the browser; the token is shown once
    page.goto(console.url + "/r/demo/sessions")
    expect(page.locator("#sessions")).to_contain_text("No agent session yet")
    result = sign(page, "form[data-ceremony='session.start']", agent="ada", task="tidy billing")
    assert "start a session for ada" in result and "allow" in result
    agent_token = token_of(result)
    expect(page.locator("#sessions")).to_contain_text("tidy billing")  # refreshed live by the log entry

    # a heartbeat over the socket by the agent moves the page with no reload
    with worker.client() as c:
        c.call("session.heartbeat", token=agent_token)
    expect(page.locator("#sessions tr.active")).to_contain_text(re.compile(r"\ds ago"))
    shot(page, "sessions")

    # freeze and unfreeze, each an assertion over that exact operation
    page.goto(console.url + "/repos")
    assert "allow" in sign(page, "form[data-ceremony='freeze']", reason="release week")
    expect(page.locator("[data-repo=demo]")).to_contain_text("frozen: release week")
    assert "allow" in sign(page, "form[data-ceremony='unfreeze']", reason="released")
    expect(page.locator("form[data-ceremony='freeze']")).to_be_visible()
    shot(page, "repositories")

    page.goto(console.url + "/r/demo/log")
    rows = page.locator("#log tbody tr")
    expect(rows).to_have_count(5)
    expect(page.locator("#log tr[data-seq='4']")).to_contain_text("webauthn-")
    expect(page.locator("#log tr[data-seq='4']")).to_contain_text("signature verified")
    page.select_option("#op", "freeze")
    page.click(".filters button")
    expect(rows).to_have_count(1)
    shot(page, "log")

    res = worker.cli("audit", "verify", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["logs"] == [{"repo": "demo", "entries": 5, "ok": True, "bad_seq": None, "reason": None,
                                             "checked_landings": 0, "trees_compared": True}]
    # offline, from the log alone: the freeze's assertion verifies over its operation, not another
    entries = logged(worker, "demo")
    key = entries[0]["op"]["human_key"]
    freeze = entries[3]
    assert key["alg"].startswith("webauthn-") and freeze["op"]["op"] == "freeze"
    sig = freeze["human"]
    assert humansig.verify(key, humansig.intent_bytes("demo", freeze["op"], sig["nonce"], sig["issued_ms"]), sig["sig"])
    other = {**freeze["op"], "reason": "something else"}
    assert not humansig.verify(key, humansig.intent_bytes("demo", other, sig["nonce"], sig["issued_ms"]), sig["sig"])
