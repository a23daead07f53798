"""One account of a database failure (lonca/database_errors.py) for the writer's log and answers,
the PostgreSQL lock and the start / `audit verify`: errors raised by real SQLite files and a real
PostgreSQL server give one line naming the driver's error, never the SQL or its parameters."""
import pytest
import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DatabaseError, OperationalError

from conftest import IN_CI, PG_ADMIN
from lonca.database_errors import database_problem, db_cause

SECRET = "secret-token-hash-0123456789"


def test_a_failed_statement_says_the_drivers_error_without_sql_or_parameters(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'lonca.db'}")
    with pytest.raises(OperationalError) as e, engine.begin() as c:
        c.execute(text("INSERT INTO missing VALUES (:t)"), {"t": SECRET})
    assert SECRET in str(e.value)  # SQLAlchemy's own text carries the parameters
    assert db_cause(e.value) == "OperationalError: no such table: missing"
    problem = database_problem(e.value, "sqlite:///x.db")
    assert problem.code == "internal" and SECRET not in problem.message and "INSERT" not in problem.message


def test_a_damaged_file_is_integrity(tmp_path):
    path = tmp_path / "lonca.db"
    path.write_bytes(b"\xa5" * 8192)
    with pytest.raises(DatabaseError) as e, create_engine(f"sqlite:///{path}").connect() as c:
        c.execute(text("SELECT * FROM sqlite_master")).all()
    problem = database_problem(e.value, str(path))
    assert problem.code == "integrity" and "DatabaseError: file is not a database" in problem.message
    assert "restore it from a backup" in problem.message


def test_a_postgresql_refusal_is_one_line():
    """The worker lock's connection (psycopg, not SQLAlchemy): a database that does not exist."""
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
    except psycopg.OperationalError:
        if IN_CI:
            pytest.fail("PostgreSQL at 127.0.0.1:5432 is not reachable")
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is not reachable")
    with pytest.raises(psycopg.OperationalError) as e:
        psycopg.connect(PG_ADMIN.replace("dbname=test", "dbname=lonca_no_such_database"), connect_timeout=3)
    cause = db_cause(e.value)
    assert cause.startswith("OperationalError: ") and "lonca_no_such_database" in cause and "\n" not in cause
