"""What a database failure says: one line naming the driver's error, never the SQL or its
parameters (they may hold a token's hash or a human's key), for the worker's log, its answers
and `lonca audit verify` alike."""
from lonca.protocol import LoncaError


def db_cause(e: BaseException) -> str:
    """One line about a database failure (a SQLAlchemy error wraps the driver's in `orig`):
    the driver's error type and the first line of its message, at most 200 characters."""
    inner = getattr(e, "orig", None) or e
    text = (str(inner).strip().splitlines() or [""])[0][:200]
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def database_problem(e: Exception, name: str) -> LoncaError:
    """A clear error for a database that cannot be opened or read (`e` a SQLAlchemy
    DatabaseError), for the worker's start and `audit verify` alike: a damaged file is
    `integrity` (restore a backup), anything else is I/O (`internal`)."""
    cause = db_cause(e)
    if any(w in cause for w in ("malformed", "not a database", "corrupt")):
        return LoncaError("integrity", f"the database {name} is damaged ({cause}); restore it from a backup "
                                       "(or try `sqlite3 FILE .recover`), then run `lonca audit verify`")
    return LoncaError("internal", f"the database {name} cannot be used ({cause}); check that it is running "
                                  "and reachable, then try again")
