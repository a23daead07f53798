"""Hostile HTTP against one real console in front of one real worker: hypothesis draws requests
to every route of the console's route table (read from the Starlette app, so a new route is
fuzzed without a change here), GET and POST, with path params, query strings, form fields, JSON
bodies and headers drawn from hostile values: NULs, lone surrogates and other non-UTF-8 bytes,
markup, `../`, long strings, huge and negative numbers, Unicode digits, duplicate fields, wrong
content types, JSON where a form is expected, a missing or forged CSRF token and Origin. Half
the requests carry the cookie of a session logged in with a software passkey (helpers.Passkey)
through the console's own ceremonies, so the pages behind the login are reached.

Asserted for every answer: never a 5xx; no traceback in the body or the console's output; a
marker of markup appears in an HTML body only escaped; an htmx request's error is a fragment;
and nothing reaches the worker's log (no request here carries a valid assertion, so no request
may write). LONCA_FUZZ_CONSOLE sets how many requests a run sends."""
import base64
import inspect
import json
import os
import re
from pathlib import Path
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from starlette.routing import Mount, Route

from conftest import git_repo
from console.conftest import Console
from helpers import Passkey
from lonca.console import actions
from lonca.console.app import create_app
from lonca.console.settings import Settings
from lonca.protocol import claim_from_facts

REQUESTS = int(os.environ.get("LONCA_FUZZ_CONSOLE", "600"))
CONSOLE_SOURCE = Path(actions.__file__).parent
# every name the console reads from a query, a form or a JSON body, from its source: a field
# added later is drawn without a change here
FIELDS = sorted(set(re.findall(r'(?:query_params|body|form\(\)\)|\bq)\.get\("([a-z_]+)"',
                               "".join(p.read_text() for p in CONSOLE_SOURCE.glob("*.py")))) | {"csrf", "kind", "repo"})
KINDS = sorted(actions.OPS) + ["login", "repo.init", "human.recover", *actions.STEP_UP]
# markup a page must never reflect as is; the part checked is the one a browser would act on
MARKERS = {b'<script>fz()</script>': "<script>fz", b'"><svg onload=fz()>': "<svg onload=fz",
           b"'><img src=x onerror=fz()>": "<img src=x onerror=fz", b"javascript:fz()//<b>": "<b>"}
NASTY = [b"", b" ", b"\x00", b"a\x00b", b"\xed\xa0\x80", b"\xed\xb0\x80x", b"\xff\xfe\xfd", b"\xc3", b"\xef\xbb\xbfdemo",
         b"../../../../etc/passwd", b"..", b"%2e%2e%2f", b"/", b"\\", b"\r\nX-Injected: 1", b"-1", b"0", b"00", b"1e309",
         b"NaN", b"-99999999999999999999999", b"18446744073709551617", "²".encode(), "١٢".encode(), "１".encode(),
         b"true", b"null", b"[]", b"{}", b"lonca_" + b"0" * 64, b"demo", b"app.py", "é/ü.py".encode()]
HEADER_SAFE = [b"", b"x", b"\xff\xfe", b"../", b"-1", "²".encode("latin-1"), b"99999999999999999999", b"<script>fz()</script>"]


# -- the target: a worker, a console, alice logged in with a passkey, a change waiting for her ----------

def passkey_for(console: Console, name: str) -> Passkey:
    """A software passkey whose assertions come from this console's origin."""
    kind = type("ConsolePasskey", (Passkey,), {"ORIGIN": console.url})
    return kind(name)


class Browser:
    """What a browser holds: the console's cookie and the CSRF token of the page it drew last."""

    def __init__(self, console: Console):
        self.http = httpx.Client(base_url=console.url, timeout=60)
        self.csrf = self.read_csrf("/enrol")

    def read_csrf(self, path: str) -> str:
        page = self.http.get(path)
        return re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text).group(1)

    def post(self, path: str, body: dict) -> dict:
        r = self.http.post(path, json=body, headers={"X-CSRF-Token": self.csrf})
        assert r.status_code == 200, (path, r.status_code, r.text)
        answer = r.json()
        self.csrf = answer.get("csrf") or self.csrf
        return answer

    def sign(self, key: Passkey, kind: str, **fields) -> dict:
        """A ceremony of the console, begun and finished with the passkey's assertion."""
        begun = self.post("/ceremony/begin", {"kind": kind, **fields})
        done = self.post("/ceremony/finish", {"ceremony": begun["ceremony"],
                                              "credential": key.assertion(begun["options"]["challenge"])})
        assert done["ok"], done
        return done

    def log_in(self, key: Passkey) -> None:
        self.csrf = self.read_csrf("/login")     # the id changes with each change of privilege
        self.sign(key, "login", human=key.name)
        self.csrf = self.read_csrf("/keys")


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    from conftest import Worker
    tmp = tmp_path_factory.mktemp("consolefuzz")
    src = git_repo(tmp / "src", {"app.py": "def charge(amount):\n    return amount * 2\n",
                                 "lonca.toml": '[review]\nagent_changes = "human"\n'})
    worker = Worker(tmp, None).start()
    console = None
    try:
        console = Console(worker)
        key = passkey_for(console, "alice")
        alice = Browser(console)
        options = alice.post("/webauthn/register/begin", {"human": "alice"})["options"]
        registered = alice.post("/webauthn/register/finish", {
            "credential": json.loads(key.registration(base64.urlsafe_b64decode(options["challenge"] + "==")))})
        assert registered["next"] == "bootstrap", registered
        alice.sign(key, "repo.init", repo="demo", import_from=str(src))
        alice.log_in(key)
        agent = alice.sign(key, "session.start", repo="demo", agent="ada", task="fees")["agent_token"]
        with worker.client() as c:
            trunk = c.call("status", token=agent)["trunk"]
            files = [{"path": "app.py", "content_b64": base64.b64encode(b"def charge(a):\n    return a\n").decode(), "mode": None}]
            facts = c.call("facts.preview", {"base": trunk, "files": files}, token=agent)["facts"]
            change = c.call("change.propose", {"change": None, "base": trunk, "files": files,
                                               "claim": claim_from_facts(facts, "round")}, token=agent)["change"]
            token = c.call("human.login", {"sig": key.sign_login(None, 3_600_000), "ttl_ms": 3_600_000})["token"]
        yield {"worker": worker, "console": console, "key": key, "alice": alice, "anonymous": Browser(console),
               "token": token, "change": change, "trunk": trunk}
    finally:
        if console:
            console.stop()
        worker.stop()


def log_heads(target) -> dict:
    """Each repository's next_seq, as the worker tells alice: what any write would move."""
    with target["worker"].client() as c:
        return {r: c.call("status", {"lists": []}, repo=r, token=target["token"])["next_seq"]
                for r in c.call("repo.list", token=target["token"])}


# -- hostile requests --------------------------------------------------------------------------------

def fields_read(source: str) -> list[str]:
    return sorted(set(re.findall(r'(?:query_params|body|form\(\)\)|\bq)\.get\("([a-z_]+)"', source)))


def routes() -> list[tuple[str, list[str], list[str], list[str]]]:
    """(path template, methods, path params, fields its endpoint reads) of every route and mount
    of the console's app."""
    app = create_app(Settings(socket=Path("/nonexistent"), origin="http://localhost:1"))
    out = []
    for r in app.routes:
        if isinstance(r, Route):
            methods = sorted((r.methods or {"GET"}) - {"HEAD"})
            source = inspect.getsource(inspect.unwrap(r.endpoint))
            # a POST's operations, or a page that hands its whole query on (expand.Ask.parse), read any field
            read = FIELDS if "POST" in methods or "(request.query_params)" in source else fields_read(source)
            out.append((r.path, methods, list(r.param_convertors), read))
        elif isinstance(r, Mount):
            out.append((r.path + "/{rest}", ["GET"], ["rest"], []))
    return out


ROUTES = routes()


def values(known: list[bytes], longest: int = 70_000):
    """Bytes a field may be sent: mostly a nasty value, markup or a real one; some random bytes
    and text; something long (in a URL, what a client sends at most: httpx refuses over 64 KiB)."""
    listed = st.sampled_from(known + NASTY + list(MARKERS))
    return st.one_of(listed, listed, listed, st.binary(max_size=24),
                     st.text(max_size=24).map(lambda t: t.encode("utf-8", "surrogatepass")),
                     st.integers(min_value=1, max_value=longest).map(lambda n: b"A" * n))


def json_values(known: list[bytes]):
    """JSON values: the texts above (a lone surrogate as one), numbers past any range, and
    lists and objects of them."""
    text = values(known).map(lambda b: b.decode("utf-8", "surrogateescape").replace("\udced\udca0\udc80", "\ud800"))
    scalars = st.one_of(text, st.integers(min_value=-2**70, max_value=2**70), st.floats(), st.booleans(), st.none())
    return st.one_of(scalars, scalars, st.lists(scalars, max_size=3),
                     st.dictionaries(st.sampled_from(FIELDS), scalars, max_size=3))


URL_LONGEST = 3_000


class Request(dict):
    """A drawn request; shown shortened when hypothesis reports it."""

    def __repr__(self) -> str:
        return repr({k: v[:200] + (b"..." if isinstance(v, bytes) else "...") if isinstance(v, (str, bytes)) and len(v) > 200 else v
                     for k, v in self.items()})


@st.composite
def request(draw, target, route: str, methods: list[str], params: list[str], read: list[str]):
    known = [b"demo", b"alice", target["change"].encode(), target["trunk"].encode(), b"app.py", b"1", b"2"]
    path = route
    # hypothesis's own choices dwell on near copies of the last request: the picks that decide
    # what a request reaches are made with a random it draws (seeded, so a run is repeatable),
    # each nasty value as likely as another
    rnd = draw(st.randoms(use_true_random=False))
    listed = known + NASTY + list(MARKERS)

    def value(longest: int) -> bytes:
        return rnd.choice(listed) if rnd.random() < 0.6 else draw(values(known, longest))
    real = {"repo": b"demo", "change": target["change"].encode(), "rest": b"lonca.css"}
    for p in params:
        # half the time the real one, so the page gets past it to the fields it reads
        raw = real.get(p, b"") if rnd.random() < 0.5 else value(URL_LONGEST)
        path = path.replace("{" + p + "}", quote_from_bytes(raw, safe="") if draw(st.booleans()) else
                            quote_from_bytes(raw, safe="/.%"))
    # each field the page reads, half the time, perhaps twice; and a stray one
    pairs = [(f.encode(), value(URL_LONGEST)) for f in read for _ in range(rnd.choice([0, 1, 1, 2]))]
    pairs += draw(st.lists(st.tuples(st.one_of(st.sampled_from(FIELDS).map(str.encode), values([], URL_LONGEST)),
                                     values(known, URL_LONGEST)), max_size=1))
    pairs = draw(st.permutations(pairs))
    if pairs:
        path += "?" + "&".join(quote_from_bytes(k, safe="") + "=" + quote_from_bytes(v, safe="") for k, v in pairs)
    method = draw(st.sampled_from(methods + ["POST"] if draw(st.integers(0, 9)) == 0 else methods))
    who = rnd.choice(["alice", "alice", "anonymous", "nobody"])
    csrf = rnd.choice(["right", "right", "wrong", "none"])
    origin = rnd.choice(["none", "right", "right", "evil", "null"])
    headers = {}
    if draw(st.booleans()):
        headers["HX-Request"] = "true"
    if draw(st.integers(0, 4)) == 0:
        headers["Last-Event-ID"] = draw(st.sampled_from(HEADER_SAFE))
    if draw(st.integers(0, 5)) == 0:
        headers["Sec-Fetch-Site"] = draw(st.sampled_from([b"cross-site", b"same-site", b"same-origin", b"\xff"]))
    body, ctype = b"", None
    if method == "POST":
        shape = draw(st.sampled_from(["form", "json", "json-other", "raw", "multipart"]))
        fields = [(f.encode(), value(70_000)) for f in rnd.sample(FIELDS, rnd.randint(0, 6))]
        if shape == "form":
            body = b"&".join(quote_from_bytes(k, safe="") .encode() + b"=" + quote_from_bytes(v, safe="").encode() for k, v in fields)
            ctype = "application/x-www-form-urlencoded"
        elif shape == "multipart":
            body = b"".join(b'--fz\r\nContent-Disposition: form-data; name="' + k + b'"\r\n\r\n' + v + b"\r\n" for k, v in fields) + b"--fz--\r\n"
            ctype = "multipart/form-data; boundary=fz"
        elif shape == "json":
            # a third of the fields any operation reads, for a kind of ceremony, mostly on demo
            anything = json_values(known)
            obj = {f: draw(anything) for f in FIELDS if draw(st.integers(0, 2)) == 0}
            obj["kind"] = draw(st.one_of(st.sampled_from(KINDS), st.sampled_from(KINDS), anything))
            obj["repo"] = draw(st.one_of(st.just("demo"), st.just("demo"), anything))
            body = json.dumps(obj).encode()
            ctype = "application/json"
        elif shape == "json-other":
            body = json.dumps(draw(json_values(known))).encode()
            ctype = "application/json"
        else:
            body = draw(st.one_of(st.binary(max_size=64), st.sampled_from([b"{", b'{"kind": "login"', b"\xff{}", b'{"a":1,"a":2}',
                                                                           b"[" * 5000, b'"\\ud800"'])))
            ctype = draw(st.sampled_from(["application/json", "text/plain", None, "application/x-www-form-urlencoded"]))
        ctype = draw(st.sampled_from([ctype, ctype, "application/json", "text/html", "multipart/form-data"]))
    return Request({"route": route, "guarded": "POST" in methods, "path": path, "method": method, "who": who, "csrf": csrf, "origin": origin, "headers": headers,
            "body": body, "ctype": ctype})


def send(target, req) -> tuple[int, str, bytes]:
    """The request as sent; its status, content type and body (the first event of a stream)."""
    console = target["console"]
    browser = None if req["who"] == "nobody" else target[req["who"]]
    headers = dict(req["headers"])
    if browser is not None:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in browser.http.cookies.items())
    if req["csrf"] != "none":
        headers["X-CSRF-Token"] = browser.csrf if req["csrf"] == "right" and browser else "0" * 64
    if req["origin"] != "none":
        headers["Origin"] = {"right": console.url, "evil": "http://evil.example", "null": "null"}[req["origin"]]
    if req["ctype"]:
        headers["Content-Type"] = req["ctype"]
    with httpx.Client(base_url=console.url, timeout=60) as http:
        with http.stream(req["method"], req["path"], headers=headers, content=req["body"] or None) as r:
            ctype = r.headers.get("content-type", "")
            body = next(r.iter_bytes(), b"") if ctype.startswith("text/event-stream") else r.read()
            return r.status_code, ctype, body, "set-cookie" in r.headers


def forged(req) -> bool:
    """Whether the cross-site guard must refuse this POST: no session's CSRF token (none, a wrong
    one, or no cookie to match it), another Origin, or a fetch another site made."""
    return (req["csrf"] != "right" or req["who"] == "nobody" or req["origin"] in ("evil", "null")
            or req["headers"].get("Sec-Fetch-Site", b"same-origin") != b"same-origin")


def check(target, req, status: int, ctype: str, body: bytes, new_cookie: bool, offset: int) -> None:
    where = (req["method"], req["path"][:300], req["who"], req["ctype"], req["body"][:300])
    if req["method"] == "POST" and req["guarded"] and forged(req):
        # refused, and the session it came with untouched (a request without a cookie gets one)
        assert (status, new_cookie and req["who"] != "nobody") == (403, False), (where, status, "a forged POST was not refused")
    out = target["console"].output.read_bytes()[offset:].decode(errors="replace")
    assert "Traceback" not in out, (where, out[-4000:])
    text = body.decode(errors="replace")
    assert status < 500, (where, status, text[:2000])
    assert "Traceback (most recent call last)" not in text, (where, text[:2000])
    if ctype.startswith("text/html"):
        raw = [m for m in MARKERS.values() if m in text]
        assert not raw, (where, raw, text[:3000])
        if req["headers"].get("HX-Request") and status >= 400:
            assert "<html" not in text.lower(), (where, status, "a whole page for an htmx request")


@pytest.mark.parametrize("route", ROUTES, ids=[r[0] for r in ROUTES])
def test_hostile_requests(target, route):
    """Hostile requests to one route: no 5xx, no traceback, nothing reflected unescaped, nothing
    logged. A route of the table is a case of its own, so each gets its share of the requests."""
    before = log_heads(target)

    @settings(max_examples=max(10, REQUESTS // len(ROUTES)), deadline=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], database=None, suppress_health_check=list(HealthCheck))
    @given(request(target, *route))
    def fuzz(req):
        offset = target["console"].output.stat().st_size
        status, ctype, body, new_cookie = send(target, req)
        check(target, req, status, ctype, body, new_cookie, offset)
        assert log_heads(target) == before, ("logged", req)
        if req["who"] == "alice" and new_cookie:    # logged out (or a new id): log in again for what follows
            target["alice"] = Browser(target["console"])
            target["alice"].log_in(target["key"])
    fuzz()


def sweep_request(route, methods, params, target, headers=None, **over) -> Request:
    real = {"repo": "demo", "change": target["change"], "rest": "lonca.css"}
    path = route
    for p in params:
        path = path.replace("{" + p + "}", real.get(p, ""))
    return Request({"route": route, "guarded": "POST" in methods, "path": path, "method": methods[0], "who": "alice",
                    "csrf": "right", "origin": "right", "headers": headers or {}, "body": b"", "ctype": None, **over})


def sweep_one(target, req) -> None:
    offset = target["console"].output.stat().st_size
    status, ctype, body, new_cookie = send(target, req)
    check(target, req, status, ctype, body, new_cookie, offset)


NUMBERISH = [b"-1", b"0", b"00", b"1e309", b"NaN", b"-99999999999999999999999", b"18446744073709551617", "²".encode(),
             "١٢".encode(), "１".encode(), b"\x00", b"\xed\xa0\x80", b"\xff\xfe\xfd", *MARKERS]


def test_every_nasty_value_in_every_field_a_page_reads(target):
    """The draws above are few a route; this sweep is systematic: alice, on real path params, sends
    each nasty value in every field a page reads (and as Last-Event-ID to the live stream), and each
    number-like or markup value in every field of each kind of ceremony."""
    before = log_heads(target)
    sent = 0
    for route, methods, params, read in ROUTES:
        if methods == ["GET"] and read:
            for v in NASTY + list(MARKERS):
                query = "&".join(f + "=" + quote_from_bytes(v, safe="") for f in read)
                req = sweep_request(route, methods, params, target, headers={"HX-Request": "true"} if len(v) % 2 else {})
                req["path"] += "?" + query
                sweep_one(target, req)
                sent += 1
    for v in HEADER_SAFE + NUMBERISH[:10]:
        if all(b < 0x80 or b >= 0xa0 for b in v):      # what a header can carry as latin-1 text
            sweep_one(target, sweep_request("/live/{repo}", ["GET"], ["repo"], target, headers={"Last-Event-ID": v}))
            sent += 1
    for kind in KINDS:
        for v in NUMBERISH:
            text = v.decode("utf-8", "surrogateescape").replace("\udced\udca0\udc80", "\ud800")
            body = json.dumps({**{f: text for f in FIELDS}, "kind": kind, "repo": "demo"}).encode()
            sweep_one(target, sweep_request("/ceremony/begin", ["POST"], [], target, body=body, ctype="application/json"))
            sent += 1
    assert log_heads(target) == before
    assert sent > 500, sent


# -- what the fuzz found, each as a plain case -------------------------------------------------------

def test_numbers_in_a_query_or_a_header_are_ascii_digits(target):
    """'²' passes str.isdigit and fails int(): the running part, the change page and the live
    stream read it as no number (they answered 500 with a traceback)."""
    alice = target["alice"]
    running = alice.http.get("/r/demo/queue/running?idle=%C2%B2", headers={"HX-Request": "true"})
    assert running.status_code == 200 and 'id="running"' in running.text, running.text[:500]
    page = alice.http.get(f"/r/demo/changes/{target['change']}?colours=%C2%B2")
    assert page.status_code == 200 and target["change"] in page.text
    with alice.http.stream("GET", "/live/demo", headers={"Last-Event-ID": "²".encode("latin-1")}) as r:
        lines = r.iter_lines()
        first = next(lines), next(lines)
    assert r.status_code == 200 and first[0] == "event: hello" and '"next_seq"' in first[1], first
    assert "Traceback" not in target["console"].output.read_text(errors="replace")


def test_a_ceremony_body_that_is_not_a_json_object_is_refused_with_what_to_send(target):
    """A body that is no JSON, no object, or holds a lone surrogate is a 400 saying what to send;
    a field of the wrong type or a number no JSON float can be a 422 saying what it is (each
    answered 500 with a traceback)."""
    alice = target["alice"]

    def begin(body: bytes) -> httpx.Response:
        return alice.http.post("/ceremony/begin", content=body, headers={"Content-Type": "application/json", "X-CSRF-Token": alice.csrf})
    for body, status, says in [
            (b"{", 400, "the body is not JSON: send a JSON object"), (b"\xff{}", 400, "the body is not JSON"),
            (b"[" * 5000, 400, "the body is not JSON"), (b"[1]", 400, "JSON but not an object"),
            (b'{"kind": "freeze", "repo": "demo", "reason": "\\ud800"}', 400, "lone surrogate"),
            (b'{"kind": ["login"]}', 422, "say which ceremony"),
            (b'{"kind": "approve", "repo": "demo", "target_seq": 1e400}', 422, "target_seq is the sequence number"),
            (b'{"kind": "session.start", "repo": "demo", "agent": "ada", "hours": 1e400}', 422, "a session lasts 1 to 168 hours"),
            (b'{"kind": "session.start", "repo": "demo", "agent": "ada", "harness": ["codex"]}', 422, "the harness is one of"),
            (b'{"kind": "comment", "repo": "demo", "target_seq": 2, "line": "\\u00b2", "path": "app.py", "text": "x"}', 422,
             "the line is a line number"),
            (b'{"kind": "repo.init", "repo": "other", "import_from": 5}', 422, "the source is text, or empty")]:
        r = begin(body)
        assert (r.status_code, r.json()["ok"]) == (status, False) and says in r.json()["error"], (body[:80], r.status_code, r.text)
    for path in ("/ceremony/finish", "/webauthn/register/begin", "/webauthn/register/finish"):
        r = alice.http.post(path, content=b"{", headers={"Content-Type": "application/json", "X-CSRF-Token": alice.csrf})
        assert r.status_code == 400 and "send a JSON object" in r.json()["error"], (path, r.text)
    r = alice.http.post("/ceremony/finish", json={"ceremony": ["x"]}, headers={"X-CSRF-Token": alice.csrf})
    assert r.status_code == 422 and "unknown or old" in r.json()["error"], r.text
    assert "Traceback" not in target["console"].output.read_text(errors="replace")


def test_a_page_param_the_worker_refuses_is_a_4xx_with_its_message(target):
    """The worker's `invalid` for a change id that is none is the asker's mistake: 400 with the
    worker's message, not 502; to an htmx request, as a fragment."""
    alice = target["alice"]
    page = alice.http.get("/r/demo/changes/demo")
    assert page.status_code == 400 and "change must be a change id" in page.text, page.text[:800]
    versions = alice.http.get(f"/r/demo/changes/{target['change']}/compare?from=9&to=x", headers={"HX-Request": "true"})
    assert versions.status_code == 400 and "choose two versions" in versions.text and "<html" not in versions.text, versions.text[:800]


def test_a_form_that_does_not_parse_is_refused_as_one_without_a_token(target):
    """A multipart body starlette cannot parse, with no CSRF header: the guard's 403 (and its
    console event), not the parser's 400 before the guard had a say."""
    anonymous = target["anonymous"]
    body = b'--fz\r\nContent-Disposition: form-data; name="csrf"\r\n\r\nx\r\n--fz\r\nContent-Disposition: form-data\r\n\r\n\xf1\r\n--fz--\r\n'
    r = anonymous.http.post("/logout", content=body, headers={"Content-Type": "multipart/form-data; boundary=fz"})
    assert r.status_code == 403 and "lacks this page's CSRF token" in r.text, (r.status_code, r.text)
