"""A real worker, a real console process and Debian's Chromium driven by Playwright, with a CDP
virtual authenticator standing in for the security key. In CI a missing Chromium fails."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

IN_CI = os.environ.get("CI") == "true"

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture
def database_url():
    """The console is a client of the socket: one store is enough here (the store tests run both)."""
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


class Console:
    """`lonca console` as a child process against a worker."""

    def __init__(self, worker, port: int | None = None):
        self.worker = worker
        self.port = port or free_port()
        self.url = f"http://localhost:{self.port}"
        self.output = worker.tmp / f"console-{self.port}.out"
        self.proc = subprocess.Popen([sys.executable, "-m", "lonca", "console", "--port", str(self.port)],
                                     env=worker.env, cwd=worker.tmp, stdout=open(self.output, "ab"), stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the console exited: {self.output.read_text()}")
            try:
                httpx.get(self.url + "/login", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"the console did not answer: {self.output.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def make_console():
    consoles = []

    def make(worker, port: int | None = None) -> Console:
        c = Console(worker, port)
        consoles.append(c)
        return c
    yield make
    for c in consoles:
        c.stop()


# package: while it lives, Playwright's sync API runs an event loop in this thread, and tests
# outside this package call asyncio.run
@pytest.fixture(scope="package")
def browser():
    if not Path(CHROMIUM).exists():
        if IN_CI:
            pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Authenticator:
    """A CDP virtual authenticator (ctap2, internal, resident keys, user verification) on a page."""

    def __init__(self, page):
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("WebAuthn.enable", {"enableUI": False})
        self.id = self.cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
            "isUserVerified": True, "automaticPresenceSimulation": True}})["authenticatorId"]

    def credentials(self) -> list[dict]:
        return self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.id})["credentials"]

    def set_sign_count(self, count: int) -> None:
        cred = self.credentials()[0]
        self.cdp.send("WebAuthn.removeCredential", {"authenticatorId": self.id, "credentialId": cred["credentialId"]})
        self.cdp.send("WebAuthn.addCredential", {"authenticatorId": self.id, "credential": {**cred, "signCount": count}})

    def bad_up(self, on: bool) -> None:
        self.cdp.send("WebAuthn.setResponseOverrideBits", {"authenticatorId": self.id, "isBadUP": on})


@pytest.fixture
def new_page(browser):
    contexts = []

    def make():
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        return page, Authenticator(page)
    yield make
    for ctx in contexts:
        ctx.close()


@pytest.fixture
def stack(make_worker, make_console):
    """A fresh worker and a console in front of it."""
    worker = make_worker()
    return worker, make_console(worker)

