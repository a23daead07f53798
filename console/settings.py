"""The console's configuration: where the worker listens and the one origin it serves. The origin
and the WebAuthn RP ID come from here, never from a request (DESIGN.md, "WebAuthn")."""
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lonca import paths

LOCAL_HOSTS = {"localhost"}


@dataclass(frozen=True)
class Settings:
    socket: Path
    origin: str  # scheme://host[:port], exactly as the browser reports it
    login_ttl_ms: int = 8 * 3600_000

    @property
    def rp_id(self) -> str:
        return urlsplit(self.origin).hostname or ""

    @property
    def secure_cookie(self) -> bool:
        """Secure everywhere but on localhost, where a browser accepts plain http as secure."""
        return self.rp_id not in LOCAL_HOSTS


def make(host: str, port: int, origin: str | None = None, socket: Path | None = None) -> Settings:
    origin = (origin or f"http://{host}:{port}").rstrip("/")
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        raise ValueError(f"{origin} is not an origin (scheme://host[:port])")
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTS:
        raise ValueError("WebAuthn needs https outside localhost; serve the console behind TLS and pass --origin https://…")
    return Settings(socket=socket or paths.socket_path(), origin=origin)
