"""One worker per home and per database.

Two workers on one home or one database would rewind each other's refs, take over each other's
socket and sign entries the other never applied. The second refuses to start (`busy`):
- the home: an exclusive flock on `LONCA_HOME/worker.lock`, held for the worker's life (the
  kernel drops it when the process ends, however it ends, so it is never stale);
- a SQLite database outside the home: the same lock on a file beside it;
- a PostgreSQL database: a session advisory lock (advisory locks are per database) held on a
  connection of its own, outside the pool. A terminated backend drops it, so `keep` takes it again
  whenever the connection is lost, and ends the worker if another one holds it meanwhile.
"""
import fcntl
import hashlib
import logging
import os
from pathlib import Path

from lonca.database_errors import db_cause
from lonca.protocol import LoncaError

log = logging.getLogger("lonca.daemon")
# one fixed key: every Lonca worker of a database competes for it
ADVISORY_KEY = int.from_bytes(hashlib.sha256(b"lonca worker").digest()[:8], "big", signed=True)


def lock_file(path: Path, what: str) -> int:
    """The open descriptor holding an exclusive flock on `path`; `busy` naming the holder when
    another process has it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise LoncaError("busy", f"another worker (pid {holder}) already runs on {what} (it holds {path}); "
                                 "stop it first, or give this worker its own LONCA_HOME and database") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


class DatabaseLock:
    """The PostgreSQL advisory lock of the database at `url` (a SQLAlchemy URL)."""

    def __init__(self, url, name: str):
        self.conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.name = name  # the URL without its password, for messages
        self.conn = None

    def acquire(self) -> None:
        """Take the lock, or `busy` when another worker holds it."""
        import psycopg
        conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5,
                               application_name="lonca worker lock")
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (ADVISORY_KEY,)).fetchone()[0]:
            holder = conn.execute("SELECT string_agg(a.pid::text || ' ' || coalesce(a.client_addr::text, 'local'), ', ') "
                                  "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                                  "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
                                  "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()[0]
            conn.close()
            raise LoncaError("busy", f"another worker already runs on the database {self.name} (backend {holder or 'unknown'} "
                                     "holds its lock); stop it first, or give this worker its own database")
        self.conn = conn

    def keep(self) -> None:
        """Check the lock's connection; when it was lost, take the lock again. `busy` when another
        worker took it meanwhile (the caller ends the worker); a database still away is retried
        on the next call."""
        import psycopg
        try:
            self.conn.execute("SELECT 1")
            return
        except psycopg.Error:
            self.conn.close()
        try:
            self.acquire()
            log.warning("the worker's lock on %s was lost with its connection and is held again", self.name)
        except psycopg.Error as e:
            log.warning("the worker's lock on %s is lost until the database answers (%s)", self.name, db_cause(e))

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()
