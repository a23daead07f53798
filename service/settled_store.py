"""The `settled_changes` table (service/store.py) behind service/settled.py: rows written in the
log writer's commit and after a replay, read by change id, by prefix, and by session."""
import json
from dataclasses import fields
from typing import Iterable

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from lonca.canonical import canonical_text

from .state import ChangeRec, RepoState
from .store import SettledChangeRow, insert_new

TABLE: Table = SettledChangeRow.__table__  # type: ignore[attr-defined,assignment]
_FIELDS = tuple(f.name for f in fields(ChangeRec))


def row(repo: str, change: str, seq: int, rec: ChangeRec) -> dict:
    return {"repo": repo, "change": change, "seq": seq, "session": rec.session, "status": rec.status["status"],
            "record": canonical_text({name: getattr(rec, name) for name in _FIELDS})}


def write(conn: Connection, rows: list[dict]) -> None:
    insert_new(conn, TABLE, rows)


def pending_rows(repos: Iterable[RepoState]) -> list[dict]:
    """What the repositories settled that the table does not hold yet (SettledChanges.to_write)."""
    return [row(rs.name, c, s, rec) for rs in repos for c, s, rec in rs.settled.to_write()]


def mark_written(repos: Iterable[RepoState], rows: list[dict]) -> None:
    by_repo: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        by_repo.setdefault(r["repo"], []).append((r["change"], r["seq"]))
    for rs in repos:
        rs.settled.written(by_repo.get(rs.name, ()))


class TableReader:
    """SettledChanges' Reader over the database (each read its own session, on its caller's thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, repo: str, change: str, before_seq: int | None) -> ChangeRec | None:
        q = select(SettledChangeRow.record).where(SettledChangeRow.repo == repo, SettledChangeRow.change == change)
        if before_seq is not None:
            q = q.where(SettledChangeRow.seq < before_seq)
        with Session(self.engine) as s:
            text = s.exec(q.order_by(col(SettledChangeRow.seq).desc()).limit(1)).first()
        return ChangeRec(**json.loads(text)) if text is not None else None

    def ids(self, repo: str, prefix: str) -> list[str]:
        # change ids are letters k to z: "{" sorts after every id that starts with the prefix
        q = select(SettledChangeRow.change).distinct().where(
            SettledChangeRow.repo == repo, SettledChangeRow.change >= prefix, SettledChangeRow.change < prefix + "{")
        with Session(self.engine) as s:
            return list(s.exec(q.order_by(SettledChangeRow.change)))

    def integrated(self, repo: str, sessions: Iterable[str]) -> list[ChangeRec]:
        q = select(SettledChangeRow.record).where(SettledChangeRow.repo == repo, SettledChangeRow.status == "integrated",
                                                  col(SettledChangeRow.session).in_(list(sessions)))
        with Session(self.engine) as s:
            return [ChangeRec(**json.loads(text)) for text in s.exec(q)]
