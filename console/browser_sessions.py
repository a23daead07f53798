"""Browser sessions, kept in the console's memory: the cookie holds a random id and nothing else.
A session holds the human's worker token (never sent to the browser) and the signing ceremonies
it has begun; its CSRF token is an HMAC of its id, so it needs no memory of its own.

A request without a live session gets an id and a cookie but no memory: the server keeps a
session only once it holds something (a login, a registration, a ceremony). Logins and the
state of ceremonies before a login are kept apart, each bounded, so no number of anonymous
requests evicts a login (issue 12). The id changes at every change of privilege (log in, log
out, a key registered, a repository created), so an id planted before cannot be logged in."""
import hashlib
import hmac
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field

from lonca.protocol import now_ms

from .settings import Settings

COOKIE = "lonca_console"
SECURE_COOKIE = "__Host-lonca_console"  # on https: only this origin can set it (no Domain, Path=/, Secure)
IDLE_MS = 12 * 3600_000
MAX_LOGINS = 10_000
MAX_PENDING = 1_000  # sessions holding a registration or a login ceremony, before any login
MAX_CEREMONIES = 32
ID_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)


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
    last_repo: str | None = None  # the repository the nav links to on pages of none (/repos, /keys, /security)
    ceremonies: OrderedDict = field(default_factory=OrderedDict)

    @property
    def logged_in(self) -> bool:
        return self.token is not None and self.expires_ms > now_ms()

    @property
    def holds_state(self) -> bool:
        return self.token is not None or bool(self.registration or self.new_key or self.ceremonies)

    def clear(self) -> None:
        self.human = self.token = self.credential_id = None
        self.expires_ms = 0
        self.registration = self.new_key = None
        self.ceremonies.clear()

    def add_ceremony(self, c: Ceremony) -> None:
        self.ceremonies[c.id] = c
        while len(self.ceremonies) > MAX_CEREMONIES:
            self.ceremonies.popitem(last=False)


class SessionStore:
    def __init__(self):
        self._secret = secrets.token_bytes(32)
        self._logins: OrderedDict[str, BrowserSession] = OrderedDict()
        self._pending: OrderedDict[str, BrowserSession] = OrderedDict()

    def csrf_for(self, sid: str) -> str:
        return hmac.new(self._secret, sid.encode(), hashlib.sha256).hexdigest()

    def _bare(self, sid: str | None = None) -> BrowserSession:
        sid = sid if sid and ID_RE.match(sid) else secrets.token_urlsafe(32)
        return BrowserSession(id=sid, csrf=self.csrf_for(sid), seen_ms=now_ms())

    def get(self, sid: str | None) -> BrowserSession:
        """The live session of this id, or one held nowhere (which keeps a well-formed id, so the
        CSRF token of a page drawn before still matches)."""
        for table in (self._logins, self._pending):
            s = table.get(sid or "")
            if s is None:
                continue
            if s.seen_ms + IDLE_MS < now_ms():
                del table[s.id]
                break
            s.seen_ms = now_ms()
            table.move_to_end(s.id)
            return s
        return self._bare(sid)

    def kept(self, s: BrowserSession) -> bool:
        return self._logins.get(s.id) is s or self._pending.get(s.id) is s

    def keep(self, s: BrowserSession) -> None:
        """Hold a session that now holds something: a login among logins, anything else among
        the pending ones. Each table evicts its own least recently used only."""
        self._logins.pop(s.id, None)
        self._pending.pop(s.id, None)
        if not s.holds_state:
            return
        table, bound = (self._logins, MAX_LOGINS) if s.token is not None else (self._pending, MAX_PENDING)
        table[s.id] = s
        while len(table) > bound:
            table.popitem(last=False)

    def rotate(self, s: BrowserSession) -> None:
        """Give the session a new id (and so a new CSRF token); the old id is forgotten."""
        self._logins.pop(s.id, None)
        self._pending.pop(s.id, None)
        s.id = secrets.token_urlsafe(32)
        s.csrf = self.csrf_for(s.id)
        self.keep(s)

    def log_in(self, s: BrowserSession, human: str, token: str, expires_ms: int, credential_id: str | None) -> None:
        s.clear()
        s.human, s.token, s.expires_ms, s.credential_id = human, token, expires_ms, credential_id
        self.rotate(s)

    def end(self, s: BrowserSession) -> None:
        """Log out: nothing of the session stays, and the browser gets a new id."""
        s.clear()
        self.rotate(s)


def cookie_name(settings: Settings) -> str:
    return SECURE_COOKIE if settings.origin.startswith("https://") else COOKIE


def cookie_header(settings: Settings, s: BrowserSession) -> bytes:
    flags = "; HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if settings.secure_cookie else "")
    return f"{cookie_name(settings)}={s.id}{flags}".encode()


class SessionMiddleware:
    """Puts the browser session in scope["state"]["session"]. The response sets the cookie when
    the id is new or changed, and the store keeps the session if it now holds something."""

    def __init__(self, app, store: SessionStore, settings: Settings):
        self.app = app
        self.store = store
        self.settings = settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        name, sid = cookie_name(self.settings), None
        for header, value in scope["headers"]:
            if header == b"cookie":
                for part in value.decode("latin-1").split(";"):
                    k, _, v = part.strip().partition("=")
                    if k == name:
                        sid = v
        session = self.store.get(sid)
        scope.setdefault("state", {})["session"] = session

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                if session.holds_state != self.store.kept(session):
                    self.store.keep(session)  # held once it holds something, let go when it holds nothing
                if session.id != sid:
                    message["headers"] = list(message.get("headers", [])) + [(b"set-cookie", cookie_header(self.settings, session))]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
