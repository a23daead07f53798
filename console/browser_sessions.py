"""Browser sessions, kept in the console's memory: the cookie holds a random id and nothing else.
A session holds the human's worker token (never sent to the browser), the CSRF token, and the
signing ceremonies it has begun."""
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field

from lonca.protocol import now_ms

from .settings import Settings

COOKIE = "lonca_console"
IDLE_MS = 12 * 3600_000
MAX_SESSIONS = 10_000
MAX_CEREMONIES = 32



@dataclass
class Ceremony:
    """An assertion the browser was asked for: what it signs, and what to do with it."""
    id: str
    kind: str
    repo: str | None
    human: str
    nonce: str
    issued_ms: int
    message: bytes
    op: dict | None = None
    ttl_ms: int | None = None
    summary: str = ""


@dataclass
class BrowserSession:
    id: str
    csrf: str
    seen_ms: int
    human: str | None = None
    token: str | None = None
    expires_ms: int = 0
    credential_id: str | None = None
    registration: dict | None = None  # the pending navigator.credentials.create: challenge, human
    new_key: dict | None = None  # a key just registered, for bootstrap or an enrolment request
    ceremonies: OrderedDict = field(default_factory=OrderedDict)

    @property
    def logged_in(self) -> bool:
        return self.token is not None and self.expires_ms > now_ms()

    def log_out(self) -> None:
        self.human = self.token = self.credential_id = None
        self.expires_ms = 0
        self.ceremonies.clear()

    def add_ceremony(self, c: Ceremony) -> None:
        self.ceremonies[c.id] = c
        while len(self.ceremonies) > MAX_CEREMONIES:
            self.ceremonies.popitem(last=False)


class SessionStore:
    def __init__(self):
        self._by_id: OrderedDict[str, BrowserSession] = OrderedDict()

    def get(self, sid: str | None) -> BrowserSession | None:
        s = self._by_id.get(sid or "")
        if s is None or s.seen_ms + IDLE_MS < now_ms():
            return None
        s.seen_ms = now_ms()
        self._by_id.move_to_end(s.id)
        return s

    def create(self) -> BrowserSession:
        s = BrowserSession(id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), seen_ms=now_ms())
        self._by_id[s.id] = s
        while len(self._by_id) > MAX_SESSIONS:
            self._by_id.popitem(last=False)
        return s


def cookie_header(settings: Settings, s: BrowserSession) -> bytes:
    flags = "; HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if settings.secure_cookie else "")
    return f"{COOKIE}={s.id}{flags}".encode()


class SessionMiddleware:
    """Puts the browser session in scope["state"]["session"], creating one (and its cookie) when
    the request brings none that is live."""

    def __init__(self, app, store: SessionStore, settings: Settings):
        self.app = app
        self.store = store
        self.settings = settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        sid = None
        for name, value in scope["headers"]:
            if name == b"cookie":
                for part in value.decode("latin-1").split(";"):
                    k, _, v = part.strip().partition("=")
                    if k == COOKIE:
                        sid = v
        session = self.store.get(sid)
        fresh = session is None
        if fresh:
            session = self.store.create()
        scope.setdefault("state", {})["session"] = session

        async def send_with_cookie(message):
            if message["type"] == "http.response.start" and fresh:
                message["headers"] = list(message.get("headers", [])) + [(b"set-cookie", cookie_header(self.settings, session))]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
