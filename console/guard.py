"""What every route shares: the browser session, the worker call with the session's token, and
the cross-site guard on every POST (the session's CSRF token, and the Origin when one is sent)."""
import hmac

from starlette.exceptions import HTTPException
from starlette.requests import Request

from lonca.client import Unreachable
from lonca.protocol import LoncaError

from .browser_sessions import BrowserSession

CSRF_HEADER = "x-csrf-token"


class NotLoggedIn(Exception):
    """The page needs a human session (none, or the worker ended it)."""


def session_of(request: Request) -> BrowserSession:
    return request.scope["state"]["session"]


async def guard(request: Request) -> BrowserSession:
    """Refuse a POST that another site could have made."""
    s = session_of(request)
    origin = request.headers.get("origin")
    if origin is not None and origin != request.app.state.settings.origin:
        raise HTTPException(403, "cross-site request refused: the Origin is not this console's")
    if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
        raise HTTPException(403, "cross-site request refused")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        sent = (await request.form()).get("csrf")
    if not isinstance(sent, str) or not hmac.compare_digest(sent, s.csrf):
        raise HTTPException(403, "the request lacks this page's CSRF token; reload the page and try again")
    return s


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
            s.log_out()
            raise NotLoggedIn() from None
        raise


def describe(e: Exception) -> str:
    """An error for people, never with a token in it (the worker's messages hold none)."""
    if isinstance(e, LoncaError):
        return f"{e.code}: {e.message}"
    if isinstance(e, Unreachable):
        return f"the worker is unreachable: {e}"
    return str(e)
