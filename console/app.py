"""The console app: routes, static files (htmx from its wheel, our own CSS and JS), sessions and
the headers that keep every request on this machine."""
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from lonca.async_client import ClientPool

from . import actions, live, pages, views
from .browser_sessions import SessionMiddleware, SessionStore
from .console_events import ConsoleEvents
from .enrolments import Enrolments
from .expand import FileLines
from .log_verification import LogVerification
from .rate_limits import RateLimit
from .settings import Settings
from .queue_stats import QueueStatsKept
from .timeline import Timelines
from .versions import Trees

ROOT = Path(__file__).resolve().parent.parent
# Nothing loads from anywhere but this console: no CDN, no font service, no frames.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
# same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with a form POST,
# which the cross-site guard refuses (log out did nothing, issue 12); other sites still get no Referer.
REFERRER_POLICY = b"same-origin"


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + [
                    (b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", REFERRER_POLICY), (b"x-frame-options", b"DENY")]
            await send(message)
        await self.app(scope, receive, send_with_headers)


async def http_error(request: Request, exc: HTTPException):
    if request.headers.get("content-type", "").startswith("application/json"):
        return JSONResponse({"ok": False, "error": exc.detail}, status_code=exc.status_code)
    return PlainTextResponse(exc.detail, status_code=exc.status_code)


async def favicon(request: Request):
    """Browsers ask for /favicon.ico whatever the page says: an SVG answers (not a 404 a page)."""
    return FileResponse(ROOT / "static" / "favicon.svg", media_type="image/svg+xml",
                        headers={"cache-control": "public, max-age=86400"})


def create_app(settings: Settings) -> Starlette:
    @asynccontextmanager
    async def lifespan(app):
        app.state.pool = ClientPool(settings.socket)
        yield
        app.state.pool.close()

    routes = [
        Route("/", pages.home),
        Route("/favicon.ico", favicon),
        Route("/enrol", pages.enrol),
        Route("/login", pages.login),
        Route("/recover", pages.recover),
        Route("/repos", pages.repos),
        Route("/keys", pages.keys),
        Route("/security", pages.security),
        Route("/r/{repo}/review", pages.review),
        Route("/r/{repo}/changes/{change}", pages.change),
        Route("/r/{repo}/changes/{change}/compare", pages.compare),
        Route("/r/{repo}/context", pages.context),
        Route("/r/{repo}/queue", pages.queue),
        Route("/r/{repo}/queue/running", pages.queue_running),
        Route("/r/{repo}/sessions", pages.sessions),
        Route("/r/{repo}/log", pages.log),
        Route("/r/{repo}/forge", pages.forge),
        Route("/r/{repo}/edit", pages.edit),
        Route("/live/{repo}", live.live),
        Route("/webauthn/register/begin", actions.register_begin, methods=["POST"]),
        Route("/webauthn/register/finish", actions.register_finish, methods=["POST"]),
        Route("/ceremony/begin", actions.ceremony_begin, methods=["POST"]),
        Route("/ceremony/finish", actions.ceremony_finish, methods=["POST"]),
        Route("/logout", actions.logout, methods=["POST"]),
        Route("/enrolments/decline", actions.decline_enrolment, methods=["POST"]),
        Mount("/static", StaticFiles(directory=ROOT / "static")),
        Mount("/vendor", StaticFiles(packages=[("js_lib_htmx", "static")])),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    app.state.settings = settings
    app.state.sessions = SessionStore()
    app.state.enrolments = Enrolments()
    app.state.console_events = ConsoleEvents()
    # ceremonies begun before a login, per address; enrolment requests per address and overall
    app.state.anonymous_limit = RateLimit(per_client=60, window_ms=60_000)
    app.state.enrolment_limit = RateLimit(per_client=3, window_ms=600_000, overall=20)
    app.state.verification = LogVerification()
    app.state.timelines = Timelines()
    app.state.trees = Trees()
    app.state.file_lines = FileLines()
    app.state.review_rows = {}      # (repo, head_hash) -> (count, rows) of the review table
    app.state.queue_stats = QueueStatsKept()
    app.state.policy_texts = {}     # (repo, policy commit, file) -> its lonca.toml or policy.cedar: a commit never changes
    app.state.templates = Jinja2Templates(directory=ROOT / "templates")
    views.register(app.state.templates.env)
    app.add_middleware(SessionMiddleware, store=app.state.sessions, settings=settings)
    app.add_middleware(SecurityHeaders)
    return app
