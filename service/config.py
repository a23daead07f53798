"""The worker's settings: paths and every limit of the wire, each overridable from the
environment so tests can make them small (LONCA_<NAME> in upper case, e.g. LONCA_IDLE_S)."""
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from lonca import install, paths
from lonca.protocol import BIG_LINE_MAX, LINE_MAX


@dataclass
class Limits:
    line_max: int = LINE_MAX
    big_line_max: int = BIG_LINE_MAX
    big_lines_budget: int = 192 * 1024 * 1024  # long lines held at once
    idle_s: float = 15 * 60
    line_s: float = 60.0  # a line must arrive within this of its first byte
    max_conns: int = 1024
    max_conns_per_uid: int = 512
    log_wait_max_ms: int = 30_000
    log_limit_max: int = 1000
    token_sweep_s: float = 2.0

    @property
    def page_b64(self) -> int:
        """What one answer may carry of base64 contents: three quarters of the long-line cap."""
        return self.big_line_max * 3 // 4


@dataclass
class Config:
    home: Path
    socket: Path
    database_url: str
    limits: Limits = field(default_factory=Limits)
    allowed_uids: frozenset[int] = frozenset()  # besides our own
    # the group whose members may open the socket (mode 0660): agents under users of their own,
    # who then can not read the human's file key (README, "Agents under another user")
    socket_group: str | None = None
    clock_offset_ms: int = 0  # an injectable clock shift for tests (LONCA_CLOCK_OFFSET_MS)
    # seed 001, repo.prepare_init: local paths a remote may name are under one of these, when
    # any is given (--local-root, LONCA_LOCAL_ROOT with os.pathsep between folders) ...
    local_roots: tuple[Path, ...] = ()
    # ... and a Git bundle directly in this folder is read from a copy (--import-dir, LONCA_IMPORT_DIR)
    import_dir: Path | None = None
    # seed 001, ping.hardened: this is the daemon of a hardened install (its uid named in the
    # root-owned daemon.toml, lonca/install.py), read once at start; `mode` says why or why not
    hardened: bool = False
    mode: str = "cooperative"

    @property
    def repos_dir(self) -> Path:
        return self.home / "repos"

    def store_path(self, repo: str) -> Path:
        """The bare git store of a repository."""
        return self.repos_dir / f"{repo}.git"

    @property
    def backups_dir(self) -> Path:
        """repo.backup's bundles; the one place in the home repo.restore may read."""
        return self.home / "backups"

    @property
    def key_path(self) -> Path:
        return self.home / "daemon.key"

    @property
    def witness_dir(self) -> Path:
        """Each log's head, outside the database (lonca.audit's witness)."""
        return self.home / "witness"


def _env_override(limits: Limits) -> Limits:
    for f in fields(limits):
        raw = os.environ.get(f"LONCA_{f.name.upper()}")
        if raw is not None:
            setattr(limits, f.name, type(getattr(limits, f.name))(float(raw)))
    return limits


def from_env() -> Config:
    uids = frozenset(int(u) for u in os.environ.get("LONCA_ALLOWED_UIDS", "").split(",") if u.strip())
    hardened, mode = install.daemon_mode(os.getuid(), install.read())
    return Config(
        home=paths.lonca_home(),
        socket=paths.socket_path(),
        database_url=paths.database_url(),
        limits=_env_override(Limits()),
        allowed_uids=uids,
        socket_group=os.environ.get("LONCA_SOCKET_GROUP") or None,
        clock_offset_ms=int(os.environ.get("LONCA_CLOCK_OFFSET_MS", "0")),
        local_roots=tuple(Path(r) for r in os.environ.get("LONCA_LOCAL_ROOT", "").split(os.pathsep) if r),
        import_dir=Path(os.environ["LONCA_IMPORT_DIR"]) if os.environ.get("LONCA_IMPORT_DIR") else None,
        hardened=hardened, mode=mode,
    )
