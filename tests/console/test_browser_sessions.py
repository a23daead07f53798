"""Browser sessions against an attacker (issue 12): Log out clicked really ends the session, an
id planted before a login is never the one logged in, and no number of anonymous requests logs
a human out. Real Chromium, a real console and worker; the attacker speaks plain HTTP."""
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
from playwright.sync_api import expect

from console.browser_steps import bootstrap, enrol, login

COOKIE = "lonca_console"


def cookie_of(page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == COOKIE)


def page_as(console, sid: str, path: str) -> httpx.Response:
    """A GET with only this session id: what an attacker holding the id sees."""
    return httpx.get(console.url + path, cookies={COOKIE: sid}, follow_redirects=False, timeout=10)


def test_clicking_log_out_ends_the_session(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo")
    before = cookie_of(page)
    assert page_as(console, before, "/repos").status_code == 200

    with page.expect_response("**/logout") as answered:
        page.get_by_role("button", name="Log out").click()
    assert answered.value.status == 303, answered.value.status  # not a 403 from the cross-site guard
    page.wait_for_url(re.compile(r"/login$"))
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)

    page.goto(console.url + "/r/demo/review")
    expect(page).to_have_url(re.compile(r"/login$"))
    assert cookie_of(page) != before
    old = page_as(console, before, "/repos")
    assert old.status_code == 303 and old.headers["location"] == "/login"


def test_the_id_changes_at_each_privilege_change(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    seen = []

    def changed() -> None:
        now = cookie_of(page)
        assert now not in seen, "the session id did not change"
        seen.append(now)
    page.goto(console.url + "/enrol")
    changed()
    assert "create the first repository" in enrol(page, console, "alice")
    changed()  # a key registered
    page.fill("#bootstrap input[name=repo]", "demo")
    page.click("#bootstrap button[type=submit]")  # signed with the new CSRF token the answer carried
    page.wait_for_url(re.compile(r"/login\?human=alice"))
    changed()  # a repository created
    login(page, console, "alice")
    page.wait_for_url(re.compile(r"/r/demo/review$"))
    changed()  # logged in
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login$"))
    changed()  # logged out
    assert all(page_as(console, sid, "/repos").status_code == 303 for sid in seen)


def test_an_id_planted_before_login_is_not_logged_in(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login$"))

    # the attacker takes an id from the console and makes it hold a login ceremony of its own
    with httpx.Client(base_url=console.url, timeout=10) as attacker:
        got = attacker.get("/login")
        planted = got.cookies[COOKIE]
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', got.text).group(1)
        begun = attacker.post("/ceremony/begin", json={"kind": "login", "human": "alice"}, headers={"X-CSRF-Token": csrf})
        assert begun.status_code == 200, begun.text
    # a page on another localhost port plants it (cookies do not keep ports apart)
    page.context.add_cookies([{"name": COOKIE, "value": planted, "domain": "localhost", "path": "/",
                               "httpOnly": True, "sameSite": "Strict"}])
    page.goto(console.url + "/login")
    assert cookie_of(page) == planted
    login(page, console, "alice")
    page.wait_for_url(re.compile(r"/r/demo/review$"))

    mine = cookie_of(page)
    assert mine != planted
    assert page_as(console, mine, "/repos").status_code == 200
    stolen = page_as(console, planted, "/repos")
    assert stolen.status_code == 303 and stolen.headers["location"] == "/login"


def test_a_flood_of_anonymous_requests_logs_nobody_out(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo")
    sid = cookie_of(page)
    url = console.url.replace("localhost", "127.0.0.1")

    # 10,100 requests without a cookie: each gets an id, none is remembered
    def burst(n: int) -> set[int]:
        with httpx.Client(base_url=url, timeout=30) as c:
            return {c.get("/login").status_code for _ in range(n)}
    with ThreadPoolExecutor(4) as pool:
        statuses = set().union(*pool.map(burst, [2525] * 4))
    assert statuses == {200}

    # ceremonies before a login are remembered, but apart from logins, bounded, and only so
    # many an address a minute: 1,100 from 20 loopback addresses do not evict the login either
    def ceremonies(address: str) -> list[int]:
        out = []
        with httpx.Client(base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address=address)) as c:
            for _ in range(61):
                c.cookies.clear()
                csrf = re.search(r'name="csrf-token" content="([^"]+)"', c.get("/login").text).group(1)
                out.append(c.post("/ceremony/begin", json={"kind": "login", "human": "alice"},
                                  headers={"X-CSRF-Token": csrf}).status_code)
        return out
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(ceremonies, [f"127.0.0.{i}" for i in range(2, 22)]))
    assert all(a[:60] == [200] * 60 and a[60] == 429 for a in answers), [a[-3:] for a in answers]

    still = page_as(console, sid, "/repos")
    assert still.status_code == 200 and 'data-repo="demo"' in still.text
    page.goto(console.url + "/r/demo/review")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    # the rate limit is a console refusal the security page shows
    page.goto(console.url + "/security")
    expect(page.locator("#security .console-events")).to_contain_text("rate_limited")


def test_on_https_the_cookie_is_host_prefixed(tmp_path):
    """Behind TLS the cookie is `__Host-` (Secure, Path=/, no Domain): a sibling host cannot plant
    it, and a plain `lonca_console` cookie is not read at all."""
    from starlette.testclient import TestClient

    from lonca.console.app import create_app
    from lonca.console.settings import make

    app = create_app(make("localhost", 8443, "https://review.example.com", socket=tmp_path / "none.sock"))
    with TestClient(app, base_url="https://review.example.com") as client:
        first = client.get("/enrol").headers["set-cookie"]
        assert first.startswith("__Host-lonca_console=") and "; Secure" in first and "Path=/" in first
        assert "domain" not in first.lower()
        sid = first.split("=", 1)[1].split(";")[0]
        client.cookies.clear()
        again = client.get("/enrol", headers={"cookie": f"__Host-lonca_console={sid}"})
        assert "set-cookie" not in again.headers  # the same id, read back
        planted = client.get("/enrol", headers={"cookie": f"{COOKIE}={sid}"})
        assert planted.headers["set-cookie"].startswith("__Host-lonca_console=") and sid not in planted.headers["set-cookie"]
