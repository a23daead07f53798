"""The database (SQLModel): SQLite in WAL mode by default, PostgreSQL when LONCA_DATABASE_URL names
one. Only the worker opens it. The log is the truth; the other tables hold what the log must not
(token hashes, used nonces, prepared operations)."""
from sqlalchemy import BigInteger, event
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel, Session, create_engine, select


class LogRow(SQLModel, table=True):
    __tablename__ = "log_entries"
    repo: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    entry: str  # the canonical JSON of the entry, byte for byte what `hash` covers
    hash: str = Field(max_length=64)
    sig: str = Field(max_length=128)


class TokenRow(SQLModel, table=True):
    __tablename__ = "tokens"
    token_hash: str = Field(primary_key=True, max_length=64)  # SHA-256 of the token: never the token
    kind: str = Field(max_length=8)  # "agent" | "human"
    repo: str | None = Field(default=None, max_length=64)
    session: str | None = Field(default=None, max_length=64)
    human: str | None = Field(default=None, max_length=64)
    key_alg: str | None = Field(default=None, max_length=32)
    key_public: str | None = Field(default=None, max_length=512)
    expires_ms: int = Field(sa_type=BigInteger)
    ended: bool = False


class NonceRow(SQLModel, table=True):
    __tablename__ = "nonces"
    nonce: str = Field(primary_key=True, max_length=128)
    human: str = Field(max_length=64)
    expires_ms: int = Field(sa_type=BigInteger)


class PreparedRow(SQLModel, table=True):
    __tablename__ = "prepared"
    op_hash: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=32)
    staging: str | None = None  # a fetched store waiting for its repo.init
    created_ms: int = Field(sa_type=BigInteger)


def _sqlite_pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def open_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    SQLModel.metadata.create_all(engine)
    return engine


def repos_in_log(engine: Engine) -> list[str]:
    with Session(engine) as s:
        return list(s.exec(select(LogRow.repo).distinct().order_by(LogRow.repo)))


def read_log(engine: Engine, repo: str, start: int = 1, limit: int | None = None) -> list[LogRow]:
    with Session(engine) as s:
        q = select(LogRow).where(LogRow.repo == repo, LogRow.seq >= start).order_by(LogRow.seq)
        if limit is not None:
            q = q.limit(limit)
        return list(s.exec(q))


class CheckpointRow(SQLModel, table=True):
    """A repository's replayed state as of `seq` (service/checkpoint.py): a start replays only
    the entries after it, once the log's entry at `seq` has `hash`. A cache of the log, never
    the truth: one that does not match is ignored and the log replayed whole."""
    __tablename__ = "checkpoints"
    repo: str = Field(primary_key=True, max_length=64)
    seq: int = Field(sa_type=BigInteger)
    hash: str = Field(max_length=64)  # the entry at seq
    format: int
    state: str  # canonical JSON (VARCHAR without a length: unbounded on PostgreSQL and SQLite)
    state_hash: str = Field(max_length=64)  # SHA-256 of state: a torn or edited write is ignored
