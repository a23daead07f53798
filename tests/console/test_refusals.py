"""Assertions the worker refuses, each with the reason shown in the browser: a replay, one without
user presence, a sign count that went back, one made on another origin."""
import re

from playwright.sync_api import expect

from console.browser_steps import bootstrap, login, sign

FINISH = """async ([body, csrf]) => {
  const r = await fetch('/ceremony/finish', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrf}, body});
  return [r.status, await r.json()];
}"""


def test_replay_presence_sign_count_and_origin(stack, new_page, make_console):
    worker, console = stack
    page, key = new_page()
    bootstrap(page, console, "alice", "demo")
    page.goto(console.url + "/repos")

    # a replayed assertion: the same signed freeze sent again
    with page.expect_request("**/ceremony/finish") as sent:
        assert "allow" in sign(page, "form[data-ceremony='freeze']", reason="audit")
    csrf = page.locator("meta[name=csrf-token]").get_attribute("content")
    status, answer = page.evaluate(FINISH, [sent.value.post_data, csrf])
    assert status == 422 and answer["error"].startswith("denied: nonce_reused:"), answer
    page.reload()

    # no user presence
    key.bad_up(True)
    result = sign(page, "form[data-ceremony='unfreeze']", reason="done")
    assert result.startswith("denied: presence_required: the authenticator did not report user presence"), result
    key.bad_up(False)

    # a sign count going back (a cloned authenticator would do this)
    key.set_sign_count(0)
    result = sign(page, "form[data-ceremony='unfreeze']", reason="done")
    assert "denied: bad_human_signature: the authenticator's sign count went back" in result, result
    key.set_sign_count(1000)
    assert "allow" in sign(page, "form[data-ceremony='unfreeze']", reason="done")

    # a POST from another site, and one without the page's CSRF token: the console refuses them
    import httpx
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert httpx.post(console.url + "/logout", cookies=cookies, data={"csrf": csrf},
                      headers={"Origin": "http://localhost:1"}).status_code == 403
    assert httpx.post(console.url + "/logout", cookies=cookies, data={"csrf": "forged"}).status_code == 403

    # the security page lists the refusals, the worker's and the console's
    page.goto(console.url + "/security")
    expect(page.locator("#security")).to_contain_text("nonce_reused")
    expect(page.locator("#security")).to_contain_text("presence_required")
    console_events = page.locator("#security .console-events")
    expect(console_events).to_contain_text("the Origin (http://localhost:1) is not this console's")
    expect(console_events).to_contain_text("lacks this page's CSRF token")
    # a visit while logged out asks whether bootstrap is open: not a refusal a human should see
    visitor, _ = new_page()
    visitor.goto(console.url + "/")
    expect(visitor).to_have_url(re.compile(r"/login$"))
    page.reload()
    expect(page.locator("#security")).not_to_contain_text("repo.prepare_init")

    # a console on another origin: the credential answers for the RP ID, the worker refuses the origin
    other = make_console(worker)
    page.goto(other.url + "/login")
    login(page, other, "alice")
    error = page.locator("#login [data-ceremony-result]")
    expect(error).to_have_class(re.compile(r"\berror\b"))
    assert f"the assertion comes from {other.url}, not the enrolled origin {console.url}" in error.inner_text()


def test_cross_site_posts_are_refused(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    page.goto(console.url + "/login")
    csrf = page.locator("meta[name=csrf-token]").get_attribute("content")
    no_token = page.evaluate("""async () => {
      const r = await fetch('/ceremony/begin', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"kind": "login", "human": "alice"}'});
      return r.status; }""")
    assert no_token == 403
    with_token = page.evaluate("""async (csrf) => {
      const r = await fetch('/ceremony/begin', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrf}, body: '{"kind": "login", "human": "alice"}'});
      return r.status; }""", csrf)
    assert with_token == 200
    import httpx
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    foreign = httpx.post(console.url + "/logout", cookies=cookies, data={"csrf": csrf}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    cookie = next(c for c in page.context.cookies() if c["name"] == "lonca_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
