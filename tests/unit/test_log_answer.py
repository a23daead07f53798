"""`log` answers each entry as the canonical text the database holds, spliced into the line
(read_methods.log_answer): the same values as decoding each entry and encoding it again, on
SQLite and on PostgreSQL, for text outside ASCII and for the window `from`/`limit` asks."""
import json

from lonca.canonical import canonical, sha256_hex
from lonca.service.read_methods import log_answer
from lonca.service.store import LogRow, open_engine
from lonca.service.wire_json import dumps
from sqlmodel import Session


def test_log_answers_are_the_stored_entries(tmp_path, database_url):
    engine = open_engine(database_url or f"sqlite:///{tmp_path / 'lonca.db'}")
    entries = [{"seq": seq, "op": {"op": "observe", "note": "çay \u2028 \"quoted\" \\ 🍵" * seq, "n": [seq, None, True]}}
               for seq in range(1, 8)]
    with Session(engine) as s:
        for e in entries:
            text = canonical(e).decode()
            s.add(LogRow(repo="r", seq=e["seq"], entry=text, hash=sha256_hex(canonical(e)), sig="ab" * 32))
        s.add(LogRow(repo="other", seq=1, entry=canonical(entries[0]).decode(), hash="0" * 64, sig="cd" * 32))
        s.commit()
    line = dumps({"id": 1, "ok": True, "result": log_answer(engine, "r", 3, 4)})
    got = json.loads(line)["result"]
    assert got == [{"entry": e, "hash": sha256_hex(canonical(e)), "sig": "ab" * 32} for e in entries[2:6]]
    assert json.loads(dumps({"result": log_answer(engine, "r", 8, 10)}))["result"] == []
    engine.dispose()
