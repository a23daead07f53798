"""The database (SQLModel): SQLite in WAL mode by default, PostgreSQL when LONCA_DATABASE_URL names
one. Only the worker opens it. The log is the truth; the other tables hold what the log must not
(token hashes, used nonces, prepared operations)."""
import json
import os
from pathlib import Path

from sqlalchemy import BigInteger, Connection, Index, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url

from lonca.protocol import LoncaError
from sqlmodel import Field, SQLModel, Session, col, create_engine, select


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
    key_public: str | None = None  # unbounded: a WebAuthn key's public part holds its COSE key (RSA-2048: ~900 hex digits)
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
        # a database that does not answer (not one that refuses) fails a connect in seconds, so
        # requests during an outage are answered instead of waiting on TCP
        engine = create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 5})
    SQLModel.metadata.create_all(engine)
    _widen_token_keys(engine)
    return engine


def _widen_token_keys(engine: Engine) -> None:
    """tokens.key_public was VARCHAR(512), too short for an RS256 passkey (or a long credential id):
    a PostgreSQL database made then is widened once (SQLite never enforced the length)."""
    if engine.dialect.name != "postgresql":
        return
    with engine.begin() as conn:
        length = conn.exec_driver_sql(
            "SELECT character_maximum_length FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'tokens' AND column_name = 'key_public'").scalar()
        if length is not None:
            conn.exec_driver_sql("ALTER TABLE tokens ALTER COLUMN key_public TYPE VARCHAR")


def insert_new(conn: Connection, table: Table, rows: list[dict]) -> None:
    """Insert the rows, leaving those the table holds already: a replay makes the same rows again
    (the settled changes, the trunks), and a commit cut short may have committed."""
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)


def repos_in_log(engine: Engine) -> list[str]:
    with Session(engine) as s:
        return list(s.exec(select(LogRow.repo).distinct().order_by(LogRow.repo)))


def read_log(engine: Engine, repo: str, start: int = 1, limit: int | None = None) -> list[LogRow]:
    with Session(engine) as s:
        q = select(LogRow).where(LogRow.repo == repo, LogRow.seq >= start).order_by(LogRow.seq)
        if limit is not None:
            q = q.limit(limit)
        return list(s.exec(q))


def read_log_text(engine: Engine, repo: str, start: int, limit: int) -> list[tuple[str, str, str]]:
    """(entry text, hash, sig) of the rows read_log reads: plain rows, no LogRow made for each
    (making them was most of a `log` call's time on its thread)."""
    with Session(engine) as s:
        q = select(LogRow.entry, LogRow.hash, LogRow.sig).where(LogRow.repo == repo, LogRow.seq >= start)
        return [tuple(r) for r in s.exec(q.order_by(LogRow.seq).limit(limit))]



def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL, None for another engine or an in-memory database."""
    u = make_url(url)
    return Path(u.database) if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:") else None


def check_writable(url: str) -> None:
    """A SQLite file the worker cannot write is refused at start, not at the first write (WAL
    also needs to create files beside it). A file without its owner's write bit counts as
    read-only even for root, who could write it: someone made it so on purpose."""
    path = sqlite_file(url)
    if path is None:
        return
    if path.exists() and (not os.access(path, os.R_OK | os.W_OK) or not path.stat().st_mode & 0o200):
        raise LoncaError("internal", f"the database file {path} is not writable by this user; make it writable "
                                     f"(chmod u+rw {path}) and start the worker again")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise LoncaError("internal", f"the folder of the database, {path.parent}, is not writable by this user "
                                     "(SQLite writes its journal beside the file); make it writable and start again")


def daemon_keys_in_log(engine: Engine) -> dict[str, str]:
    """repo -> the daemon key its log ends on: its repo.init's (seq 1), or the key of its last
    allowed daemon.rotate or daemon.recover (read only when the key file is missing: a scan)."""
    with Session(engine) as s:
        rows = s.exec(select(LogRow).where((LogRow.seq == 1) | col(LogRow.entry).contains('"op":"daemon.r'))
                      .order_by(col(LogRow.repo), col(LogRow.seq)))
        keys: dict[str, str] = {}
        for r in rows:
            entry = json.loads(r.entry)
            op = entry["op"]
            if r.seq == 1:
                keys[r.repo] = op.get("daemon_key", "")
            elif op.get("op") in ("daemon.rotate", "daemon.recover") and entry["decision"]["outcome"] == "allow":
                keys[r.repo] = op["key"]
        return keys


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


class SettledChangeRow(SQLModel, table=True):
    """A change's record as the entry `seq` settled it (out of the queue for good): written in the
    commit of that entry, read by change.get, change.resolve and a new version of the change
    (service/settled.py). Every version a change settled at has its row, for replays."""
    __tablename__ = "settled_changes"
    __table_args__ = (Index("settled_changes_session", "repo", "session"),)  # a workspace's integrated changes
    repo: str = Field(primary_key=True, max_length=64)
    change: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True, sa_type=BigInteger)
    session: str | None = Field(default=None, max_length=64)
    status: str = Field(max_length=16)
    record: str     # canonical JSON of the ChangeRec's fields


class TrunkRow(SQLModel, table=True):
    """A commit that became the repository's trunk, with the integrations trunk had counted then
    (one row per entry that moved trunk: the count is its key): written in the commit of that
    entry, read for a base older than memory's window (service/trunk_history.py)."""
    __tablename__ = "trunks"
    __table_args__ = (Index("trunks_commit", "repo", "commit"),)   # a base's latest count
    repo: str = Field(primary_key=True, max_length=64)
    integrations: int = Field(primary_key=True, sa_type=BigInteger)
    commit: str = Field(max_length=64)
