"""The review console in a real Chromium: time from a log entry to the DOM update (p95 over 50
entries; baseline: the same entries followed straight from the socket with the long poll the
console's SSE uses), and the server time of the review page with 1 000 pending changes
(baseline: the `status` call the page is built from, its pending list only; the whole `status`
beside it), drawn again at the same log position and at a new one (a heartbeat between), a change's page, first viewed (its timeline read from the log) and drawn again (baseline: the three calls the page is built from),
the page of a change with a 6,000-line diff (same baseline), and the fragment requests an open
change page makes while 64 agents heartbeat (target 0; baseline: the heartbeats it was told of,
which is what it requested before heartbeats stopped redrawing review pages)."""
import base64
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.worker import BenchWorker, median, pct, table
from lonca.client import Client
from lonca.protocol import claim_from_facts

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
EVENTS = 50
PENDING = 1000
BIG_LINES = 6000
AGENTS = 64
BEATS = 5
SCOPE = {"paths": ["**"], "symbols": None, "ops": [], "max_files": None, "max_lines": None, "scratch": []}
# The entries the page's stream delivered, by op.
COUNT = """() => { window.seen = {};
  document.body.addEventListener('lonca:log', (e) => { seen[e.detail.op] = (seen[e.detail.op] || 0) + 1; }); }"""
# The DOM time of each log row as it appears (the log page refreshes on every entry).
OBSERVE = """() => { window.seen = {}; new MutationObserver(() => {
  document.querySelectorAll('#log tr[data-seq]').forEach(r => { window.seen[r.dataset.seq] ??= Date.now(); });
}).observe(document.getElementById('log'), {childList: true, subtree: true}); }"""


def change_calls(change: str) -> tuple:
    """The worker calls a change page is built from (with status, only the lists it shows)."""
    return (("change.get", {"change": change}), ("change.diff", {"change": change, "format": None}),
            ("status", {"lists": ["leases", "pending"]}))


def _source() -> Path:
    src = Path(tempfile.mkdtemp(prefix="lonca-bench-console-src-"))
    (src / "lonca.toml").write_text('[review]\ncritical_paths = ["pending/*"]\n\n[sessions]\nops_per_minute = 100000\n')
    (src / "app.py").write_text("def charge(amount):\n    return amount * 2\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@localhost", "GIT_COMMITTER_NAME": "B", "GIT_COMMITTER_EMAIL": "b@localhost"}
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "bench"]):
        subprocess.run(["git", *argv], cwd=src, env=env, check=True, capture_output=True)
    return src


def _big_change(c: Client, agent: str) -> str:
    """A pending change that adds a file of BIG_LINES lines (pending/ is a critical path)."""
    trunk = c.call("status", token=agent)["trunk"]
    path = "pending/big.py"
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(BIG_LINES // 2))
    c.call("lease.acquire", {"set": None, "items": [{"symbol": f"{path}#<file>", "kind": "edit"}],
                             "intent": "a big file", "ttl_ms": 3_600_000}, token=agent)
    files = [{"path": path, "content_b64": base64.b64encode(text.encode()).decode(), "mode": None}]
    facts = c.call("facts.preview", {"base": trunk, "files": files}, token=agent)["facts"]
    return c.call("change.propose", {"change": None, "base": trunk, "files": files,
                                     "claim": claim_from_facts(facts, "a big file")}, token=agent)["change"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _submit(page, form: str, **fields) -> None:
    f = page.locator(form)
    for k, v in fields.items():
        f.locator(f"[name={k}]").fill(v)
    f.locator("button[type=submit]").click()


def _sign(page, form: str, **fields) -> str:
    """Submit a ceremony form and return what it shows once it is done."""
    _submit(page, form, **fields)
    out = page.locator(form).locator("[data-ceremony-result]")
    page.wait_for_function("el => /\\b(ok|error)\\b/.test(el.className)", arg=out.element_handle())
    return out.inner_text()


def _browser_setup(page, url: str, src: Path) -> str:
    """Enrol a key, create the repository, log in, start an agent session; its token."""
    page.goto(url + "/enrol")
    page.fill("#register input[name=human]", "alice")
    page.click("#register button[type=submit]")
    page.wait_for_selector("#bootstrap:not([hidden])")
    _submit(page, "#bootstrap", repo="bench", import_from=str(src))
    page.wait_for_url(re.compile(r"/login"))
    _submit(page, "#login", human="alice")
    page.wait_for_url(re.compile(r"/review$"))
    page.goto(url + "/r/bench/sessions")
    return re.search(r"lonca_[0-9a-f]{64}", _sign(page, "form[data-ceremony='session.start']", agent="bench")).group(0)


def _follow(sock: Path, token: str, start: int, count: int, arrived: dict) -> None:
    """The baseline: the socket's long poll, as the console's SSE stream uses it."""
    with Client(sock, timeout=None) as c:
        while len(arrived) < count:
            for e in c.call("log", {"from": start, "wait_ms": 10_000}, repo="bench", token=token):
                arrived[e["entry"]["seq"]] = int(time.time() * 1000)
                start = e["entry"]["seq"] + 1


def main() -> None:
    from playwright.sync_api import sync_playwright

    w = BenchWorker()
    port = _port()
    url = f"http://localhost:{port}"
    console = subprocess.Popen([sys.executable, "-m", "lonca", "console", "--port", str(port)], env=w.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/login", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            cdp = page.context.new_cdp_session(page)
            cdp.send("WebAuthn.enable", {"enableUI": False})
            cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
                "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
                "isUserVerified": True, "automaticPresenceSimulation": True}})
            agent = _browser_setup(page, url, _source())
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}

            # 1. a log entry to the DOM
            page.goto(url + "/r/bench/log")
            page.wait_for_selector("#log tr[data-seq]")
            page.evaluate(OBSERVE)
            page.wait_for_timeout(500)  # the SSE stream is open
            with Client(w.socket) as c:
                c.call("session.heartbeat", token=agent)
                page.wait_for_timeout(300)
                made: dict[int, int] = {}
                for _ in range(EVENTS):
                    hb = c.call("session.heartbeat", token=agent)
                    made[hb["seq"]] = hb["now_ms"]
                    time.sleep(0.15)
            page.wait_for_function(f"() => window.seen && window.seen['{max(made)}']", timeout=30_000)
            seen = page.evaluate("() => window.seen")
            dom = [seen[str(s)] - t for s, t in made.items() if str(s) in seen]

            # the baseline, on the same kind of entries: a follower on the socket (an agent token reads)
            arrived: dict[int, int] = {}
            with Client(w.socket) as c:
                nxt = c.call("session.heartbeat", token=agent)["seq"]
                follower = threading.Thread(target=_follow, args=(w.socket, agent, nxt + 1, EVENTS, arrived), daemon=True)
                follower.start()
                time.sleep(0.3)
                base_made = {}
                for _ in range(EVENTS):
                    hb = c.call("session.heartbeat", token=agent)
                    base_made[hb["seq"]] = hb["now_ms"]
                    time.sleep(0.15)
            follower.join(30)
            socket_lat = [arrived[s] - t for s, t in base_made.items() if s in arrived]

            # 2. an open change page (a 6,000-line diff) while 64 agents heartbeat: the fragment
            # requests it makes (target 0), beside the heartbeats its stream delivered
            with Client(w.socket) as c:
                big = _big_change(c, agent)
                children = [c.call("cap.attenuate", {"agent": f"hb{i}", "scope": SCOPE, "expires_ms": int(time.time() * 1000) + 3_600_000},
                                   token=agent)["token"] for i in range(AGENTS)]
            page.goto(url + f"/r/bench/changes/{big}")
            page.wait_for_selector("#part-diff table.diff")
            page.evaluate(COUNT)
            page.wait_for_timeout(500)  # the SSE stream is open
            fragments: list[str] = []
            page.on("request", lambda r: fragments.append(r.url) if r.headers.get("hx-request") else None)
            t = time.perf_counter()
            with Client(w.socket) as c:
                for _ in range(BEATS):
                    for child in children:
                        c.call("session.heartbeat", token=child)
            page.wait_for_function(f"() => (window.seen.observe || 0) >= {AGENTS * BEATS}", timeout=60_000)
            beat_s = time.perf_counter() - t
            delivered = page.evaluate("() => window.seen.observe")
            browser.close()

        # 3. the review page with 1 000 pending changes
        with Client(w.socket) as c:
            trunk = c.call("status", token=agent)["trunk"]
            for i in range(PENDING):
                child = c.call("cap.attenuate", {"agent": f"a{i}", "scope": SCOPE, "expires_ms": int(time.time() * 1000) + 3_600_000}, token=agent)["token"]
                path = f"pending/{i}.txt"
                c.call("lease.acquire", {"set": None, "items": [{"symbol": f"{path}#<file>", "kind": "edit"}],
                                         "intent": f"note {i}", "ttl_ms": 3_600_000}, token=child)
                files = [{"path": path, "content_b64": "bm90ZQo=", "mode": None}]
                facts = c.call("facts.preview", {"base": trunk, "files": files}, token=child)["facts"]
                claim = claim_from_facts(facts, f"note {i}")
                c.call("change.propose", {"change": None, "base": trunk, "files": files, "claim": claim}, token=child)
            st = c.call("status", token=agent)
            pending = len(st["pending"])
            first = min(st["pending"], key=lambda x: x["seq"])["change"]     # the most log after it
            entries_after = st["next_seq"] - min(x["seq"] for x in st["pending"])
            status_ms, whole_status_ms, change_calls_ms = [], [], []
            for _ in range(20):
                t = time.perf_counter()
                c.call("status", {"lists": ["pending"]}, token=agent)
                status_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                c.call("status", token=agent)
                whole_status_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                for method, params in change_calls(first):
                    c.call(method, params, token=agent)
                change_calls_ms.append((time.perf_counter() - t) * 1000)
        page_ms = []
        with httpx.Client(base_url=url, cookies=cookies) as h:
            for _ in range(20):
                t = time.perf_counter()
                r = h.get("/r/bench/review")
                page_ms.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200 and r.text.count("<tr data-seq=") == pending
            # the same page at a new log position each time (a heartbeat between): nothing kept helps
            fresh_ms = []
            with Client(w.socket) as c:
                for _ in range(20):
                    c.call("session.heartbeat", token=agent)
                    t = time.perf_counter()
                    r = h.get("/r/bench/review")
                    fresh_ms.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200 and r.text.count("<tr data-seq=") == pending
            # 4. a change page: the first view reads its timeline from the log, later ones only what is new
            t = time.perf_counter()
            r = h.get(f"/r/bench/changes/{first}")
            change_first_ms = (time.perf_counter() - t) * 1000
            assert r.status_code == 200 and 'data-kind="proposed"' in r.text
            change_ms = []
            for _ in range(20):
                t = time.perf_counter()
                h.get(f"/r/bench/changes/{first}")
                change_ms.append((time.perf_counter() - t) * 1000)
            # 5. the change page of a 6,000-line diff (its timeline read once already, above)
            big_ms = []
            for _ in range(10):
                t = time.perf_counter()
                r = h.get(f"/r/bench/changes/{big}")
                big_ms.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200 and r.text.count('<tr class="add">') == BIG_LINES
        with Client(w.socket) as c:
            big_calls_ms = []
            for _ in range(10):
                t = time.perf_counter()
                for method, params in change_calls(big):
                    c.call(method, params, token=agent)
                big_calls_ms.append((time.perf_counter() - t) * 1000)
    finally:
        console.terminate()
        console.wait(10)
        w.stop()
    table([
        (f"log entry -> DOM, p95 of {len(dom)} (ms)", pct(dom, 95), pct(socket_lat, 95), "< 500"),
        ("log entry -> DOM, median (ms)", median(dom), median(socket_lat), ""),
        (f"review page, {pending} pending, median (ms)", median(page_ms), median(status_ms), "< 150"),
        (f"review page, {pending} pending, p95 (ms)", pct(page_ms, 95), pct(status_ms, 95), "< 150"),
        (f"review page, {pending} pending, after a new entry, median (ms)", median(fresh_ms), median(status_ms), "< 150"),
        (f"review page, {pending} pending, after a new entry, p95 (ms)", pct(fresh_ms, 95), pct(status_ms, 95), "< 150"),
        (f"status, {pending} pending: every list, median (baseline: the pending list) (ms)", median(whole_status_ms), median(status_ms), ""),
        (f"change page, first view, timeline over {entries_after} entries (ms)", change_first_ms, median(change_calls_ms), ""),
        ("change page, drawn again, median (ms)", median(change_ms), median(change_calls_ms), ""),
        (f"change page, {BIG_LINES}-line diff, median (ms)", median(big_ms), median(big_calls_ms), "< 300"),
        (f"change page, {BIG_LINES}-line diff, p95 (ms)", pct(big_ms, 95), pct(big_calls_ms, 95), "< 300"),
        (f"open change page, {AGENTS} agents heartbeat: fragment requests/s (baseline: heartbeats/s it saw)",
         len(fragments) / beat_s, delivered / beat_s, "0"),
    ])
