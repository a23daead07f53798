"""The `trunks` table (service/store.py) behind service/trunk_history.py: rows written in the log
writer's commit and after a replay, read by commit."""
from typing import Iterable

from sqlalchemy import Connection, Table, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from .state import RepoState
from .store import TrunkRow, insert_new

TABLE: Table = TrunkRow.__table__  # type: ignore[attr-defined,assignment]


def write(conn: Connection, rows: list[dict]) -> None:
    insert_new(conn, TABLE, rows)


def pending_rows(repos: Iterable[RepoState]) -> list[dict]:
    """What the repositories made trunk that the table does not hold yet (TrunkHistory.to_write)."""
    return [{"repo": rs.name, "integrations": at, "commit": commit} for rs in repos for commit, at in rs.trunks.to_write()]


def mark_written(repos: Iterable[RepoState], rows: list[dict]) -> None:
    by_repo: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        by_repo.setdefault(r["repo"], []).append((r["commit"], r["integrations"]))
    for rs in repos:
        rs.trunks.written(by_repo.get(rs.name, ()))


class TableReader:
    """TrunkHistory's Reader over the database (each read its own session, on its caller's thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def position(self, repo: str, commit: str) -> int | None:
        q = select(func.max(TrunkRow.integrations)).where(TrunkRow.repo == repo, TrunkRow.commit == commit)
        with Session(self.engine) as s:
            return s.exec(q).one()
