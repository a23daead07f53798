"""What every route shares: the browser session, the worker call with the session's token, and
the cross-site guard on every POST (the session's CSRF token, and the Origin when one is sent).
Each refusal here is a console event on the security page."""
import hmac
import json
import re
from typing import NoReturn

from starlette.exceptions import HTTPException
from starlette.requests import Request

from lonca.client import Unreachable
from lonca.protocol import LoncaError

from .browser_sessions import BrowserSession

CSRF_HEADER = "x-csrf-token"


class NotLoggedIn(Exception):
    """The page needs a human session (none, or the worker ended it)."""


class Refusal(Exception):
    """A request the console turns down before the worker sees it."""


def session_of(request: Request) -> BrowserSession:
    return request.scope["state"]["session"]


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def refuse(request: Request, kind: str, status: int, detail: str) -> NoReturn:
    request.app.state.console_events.add(kind, request.url.path, client_of(request), detail)
    raise HTTPException(status, detail)


async def guard(request: Request) -> BrowserSession:
    """Refuse a POST that another site could have made. An anonymous session's POST may make the
    console remember a ceremony, so an address gets only so many of those a minute."""
    s = session_of(request)
    origin = request.headers.get("origin")
    if origin is not None and origin != request.app.state.settings.origin:
        refuse(request, "cross_site_origin", 403, f"cross-site request refused: the Origin ({origin[:80]}) is not this console's")
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site not in (None, "same-origin", "none"):
        refuse(request, "cross_site_fetch", 403, f"cross-site request refused (Sec-Fetch-Site: {fetch_site[:20]})")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        try:
            sent = (await request.form()).get("csrf")
        except HTTPException:
            sent = None     # a form that does not parse holds no token: refused as any other without one
    if not isinstance(sent, str) or not hmac.compare_digest(sent, s.csrf):
        refuse(request, "csrf", 403, "the request lacks this page's CSRF token; reload the page and try again")
    if not request.app.state.sessions.kept(s):
        why = request.app.state.anonymous_limit.allow(client_of(request))
        if why:
            refuse(request, "rate_limited", 429, f"too many requests before a login: {why}")
    return s


async def json_object(request: Request) -> dict:
    """The body of a ceremony's POST: a JSON object of UTF-8 text, or a 400 that says so (the
    browser's script always sends one; anything else is hand-made). Checked once here, so no
    operation meets bytes that are not text, a list where it reads fields, or a lone surrogate
    that no answer could encode."""
    try:
        body = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise HTTPException(400, "the body is not JSON: send a JSON object, as the console's page does") from None
    if not isinstance(body, dict):
        raise HTTPException(400, "the body is JSON but not an object: send a JSON object, as the console's page does")
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise HTTPException(400, "the body holds a lone surrogate (\\ud800 to \\udfff), which is no text: send UTF-8 text") from None
    return body


def whole(value, low: int, high: int) -> int | None:
    """A whole number from low to high, sent as a JSON integer or as ASCII digits (a form's or a
    query's text); None for anything else: '²' passes str.isdigit but not int(), '１' and '١'
    pass both but are no number a page sends, a float is no line or entry number, and a bool is
    no number at all."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,18}", value.strip()):
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    return None


# `status` without its lists (status.lists, an addition to the seed): the repository's header
# fields; a page asks for the lists it shows and no more (with 1,000 pending, the whole answer is
# 1.5 MB and costs a page most of its time)
HEADER = {"lists": []}


async def call(request: Request, method: str, params: dict | None = None, repo: str | None = None):
    """A worker call with the browser session's human token; a session the worker no longer
    knows is logged out here."""
    s = session_of(request)
    if not s.logged_in:
        raise NotLoggedIn()
    try:
        return await request.app.state.pool.call(method, params, repo=repo, token=s.token)
    except LoncaError as e:
        if e.code == "unauthenticated":
            request.app.state.sessions.end(s)
            raise NotLoggedIn() from None
        raise


def describe(e: Exception) -> str:
    """An error for people, never with a token in it (the worker's messages hold none)."""
    if isinstance(e, LoncaError):
        return f"{e.code}: {e.message}"
    if isinstance(e, Unreachable):
        return f"the worker is unreachable: {e}"
    return str(e)
