"""Steps the browser tests share: enrol a key, create the first repository, log in, sign a form."""
import re

from playwright.sync_api import Page, expect


def enrol(page: Page, console, name: str) -> str:
    """Register a key on /enrol; returns the message the console shows."""
    page.goto(console.url + "/enrol")
    page.fill("#register input[name=human]", name)
    page.click("#register button[type=submit]")
    result = page.locator("#register [data-ceremony-result]")
    expect(result).to_have_class(re.compile(r"\b(ok|error)\b"))
    return result.inner_text()


def bootstrap(page: Page, console, name: str = "alice", repo: str = "demo", import_from: str | None = None) -> None:
    """Enrol, create the first repository with the key, and log in."""
    assert "create the first repository" in enrol(page, console, name)
    page.fill("#bootstrap input[name=repo]", repo)
    if import_from:
        page.fill("#bootstrap input[name=import_from]", import_from)
    page.click("#bootstrap button[type=submit]")
    page.wait_for_url(re.compile(r"/login\?human=" + name))
    login(page, console, name)
    page.wait_for_url(re.compile(rf"/r/{repo}/review$"))


def login(page: Page, console, name: str) -> None:
    if "/login" not in page.url:
        page.goto(console.url + "/login")
    page.fill("#login input[name=human]", name)
    page.click("#login button[type=submit]")


def sign(page: Page, form: str, **fields) -> str:
    """Fill a ceremony form, submit it, and return the result it shows (ok or error)."""
    f = page.locator(form)
    for name, value in fields.items():
        f.locator(f"[name={name}]").fill(value)
    f.locator("button[type=submit]").click()
    result = f.locator("[data-ceremony-result]")
    expect(result).to_have_class(re.compile(r"\b(ok|error)\b"))
    return result.inner_text()


def agent_session(page: Page, console, source, task: str, agent: str = "ada") -> str:
    """alice creates `demo` from `source` in the browser and starts an agent session on the
    Sessions page: the agent's token, shown once."""
    bootstrap(page, console, "alice", "demo", import_from=str(source))
    page.goto(console.url + "/r/demo/sessions")
    return re.search(r"lonca_[0-9a-f]{64}", sign(page, "form[data-ceremony='session.start']", agent=agent, task=task)).group(0)
