"""Repositories, humans and agent sessions over the real socket, on SQLite and PostgreSQL; the
log verifies offline, and a changed byte is found."""
import json

import pytest
from sqlalchemy import create_engine, text

from helpers import human_key, init_repo, login, now_ms, session_op, start_session
from lonca.protocol import LoncaError


@pytest.fixture
def keyed(worker, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    return worker, human_key("alice")


def db_url(worker) -> str:
    return worker.env.get("LONCA_DATABASE_URL") or f"sqlite:///{worker.home / 'lonca.db'}"


def test_the_whole_flow_then_a_changed_byte(keyed, source_repo):
    worker, key = keyed
    with worker.client() as c:
        res = init_repo(c, key, "demo", import_from=str(source_repo), branch="main")
        assert res["seq"] == 1 and res["decision"]["outcome"] == "allow"
        htoken = login(c, key)
        st = c.call("status", repo="demo", token=htoken)
        assert st["trunk"] == res["op"]["trunk"] and st["next_seq"] == 2
        assert st["humans"]["alice"]["public"] == key.public["public"]
        files = c.call("tree", {"commit": st["trunk"]}, repo="demo", token=htoken)
        assert [(f["path"], f["mode"]) for f in files] == [("README.md", "regular"), ("app.py", "executable"), ("lib/util.py", "regular")]
        started = start_session(c, key, htoken)
        token = started["token"]
        assert token.startswith("lonca_") and not token.startswith("lonca_h_")
        me = c.call("whoami", token=token)
        assert me["repo"] == "demo" and me["actor"].startswith("agent:agent-1/") and me["session"]["active"]
        hb = c.call("session.heartbeat", token=token)
        assert hb["seq"] == 3 and hb["timeout_ms"] > 0 and hb["leases"] == []
        blobs = c.call("blobs", {"commit": st["trunk"], "paths": ["lib/util.py"]}, token=token)
        assert blobs[0]["content_b64"] == "ZGVmIGhlbHBlcigpOgogICAgcmV0dXJuIDQyCg=="
        ended = c.call("session.end", {"files": [{"path": "x.py", "entry": None}]}, token=token)
        assert ended["seq"] == 4 and ended["unproposed"] == ["x.py"]
        with pytest.raises(LoncaError) as e:
            c.call("session.heartbeat", token=token)
        assert e.value.code in ("session_inactive", "unauthenticated")
        log = c.call("log", {"from": 1}, repo="demo", token=htoken)
    assert [e["entry"]["op"]["op"] for e in log] == ["repo.init", "session.start", "observe", "session.end"]
    assert log[1]["entry"]["human"]["human"] == "alice" and log[2]["entry"]["actor"]["kind"] == "agent"
    ok = worker.cli("audit", "verify")
    assert ok.returncode == 0, ok.stderr
    assert "4 entries" in ok.stdout

    engine = create_engine(db_url(worker))
    with engine.begin() as conn:
        entry = conn.execute(text("SELECT entry FROM log_entries WHERE repo='demo' AND seq=3")).scalar_one()
        changed = entry.replace('"heartbeat"', '"heartbeaT"')
        assert changed != entry and len(changed) == len(entry)
        conn.execute(text("UPDATE log_entries SET entry=:e WHERE repo='demo' AND seq=3"), {"e": changed})
    engine.dispose()
    bad = worker.cli("audit", "verify", "--json")
    assert bad.returncode == 1
    out = json.loads(bad.stdout)
    assert out["ok"] is False and out["logs"][0]["bad_seq"] == 3
    assert "seq 3" in bad.stderr


def test_state_is_the_replay_of_the_log(make_worker, monkeypatch, source_repo):
    worker = make_worker()
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    key = human_key("alice")
    with worker.client() as c:
        init_repo(c, key, "demo", import_from=str(source_repo))
        htoken = login(c, key)
        token = start_session(c, key, htoken)["token"]
        c.call("session.heartbeat", token=token)
        before = c.call("status", repo="demo", token=htoken)
    worker.stop()
    worker.start()
    with worker.client() as c:
        after = c.call("status", repo="demo", token=htoken)  # tokens survive a restart
        assert c.call("whoami", token=token)["session"]["last_seen_ms"] == before["sessions"][0]["last_seen_ms"]
    for k in ("trunk", "next_seq", "head_hash", "humans", "sessions"):
        assert after[k] == before[k], k


def test_export_and_verify_a_file(keyed, tmp_path):
    worker, key = keyed
    with worker.client() as c:
        init_repo(c, key, "empty")
    exported = worker.cli("log", "--repo", "empty", "--json", check=True).stdout
    path = tmp_path / "export.jsonl"
    path.write_text(exported)
    res = worker.cli("audit", "verify", "--file", str(path), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["logs"][0]["entries"] == 1
    lines = exported.splitlines()
    tampered = json.loads(lines[0])
    tampered["entry"]["time_ms"] += 1
    path.write_text(json.dumps(tampered) + "\n")
    res = worker.cli("audit", "verify", "--file", str(path), "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["logs"][0]["bad_seq"] == 1


def test_log_long_poll(keyed):
    worker, key = keyed
    with worker.client() as c, worker.client() as c2:
        init_repo(c, key, "demo")
        htoken = login(c, key)
        import threading
        import time
        got = {}

        def poll():
            t = time.time()
            got["entries"] = c2.call("log", {"from": 2, "wait_ms": 10_000}, repo="demo", token=htoken)
            got["waited"] = time.time() - t
        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.5)
        start_session(c, key, htoken)  # answered while the poll waits: it holds no lock
        th.join(15)
        assert [e["entry"]["seq"] for e in got["entries"]] == [2] and 0.4 < got["waited"] < 9
        t = time.time()
        assert c.call("log", {"from": 3, "wait_ms": 300}, repo="demo", token=htoken) == []
        assert time.time() - t >= 0.28
        with pytest.raises(LoncaError) as e:
            c.call("log", {"from": 0}, repo="demo", token=htoken)
        assert e.value.code == "invalid"


def test_bad_input_gets_its_code_and_nothing_is_logged(keyed, source_repo):
    worker, key = keyed
    with worker.client() as c:
        init_repo(c, key, "demo")
        init_repo(c, key, "other")
        htoken = login(c, key)
        agent = start_session(c, key, htoken)["token"]
        other_agent = start_session(c, key, htoken, repo="other")["token"]
        seq_before = c.call("status", repo="demo", token=htoken)["next_seq"]

        def code(method, params=None, **kw):
            with pytest.raises(LoncaError) as e:
                c.call(method, params, **kw)
            return e.value.code

        # shapes
        assert code("status", {"unknown": 1}, repo="demo", token=htoken) == "invalid"
        assert code("log", {"from": "1"}, repo="demo", token=htoken) == "invalid"
        assert code("log", {}, repo="demo", token=htoken) == "invalid"
        assert code("status", token=htoken) == "invalid"  # a human names the repository
        assert code("status", repo="nope", token=htoken) == "not_found"
        assert code("tree", {"commit": "f" * 40}, repo="demo", token=htoken) == "not_found"
        assert code("blobs", {"commit": c.call("status", repo="demo", token=htoken)["trunk"], "paths": ["no/such"]},
                    repo="demo", token=htoken) == "not_found"
        # tokens
        assert code("status", repo="demo") == "unauthenticated"
        assert code("status", repo="demo", token="lonca_" + "0" * 64) == "unauthenticated"
        assert code("session.heartbeat", token=htoken) == "forbidden"  # a human token where an agent's goes
        assert code("repo.list", token=agent) == "forbidden"  # an agent token where a human's goes
        assert code("status", repo="demo", token=other_agent) == "forbidden"  # another repository's token
        assert code("human.logout", token=agent) == "forbidden"
        short = c.call("human.login", {"sig": key.sign_login(None, 1), "ttl_ms": 1})["token"]
        assert code("status", repo="demo", token=short) == "unauthenticated"  # expired
        # signatures
        sig = key.sign_login(None, 3_600_000)
        c.call("human.login", {"sig": sig, "ttl_ms": 3_600_000})
        assert code("human.login", {"sig": sig, "ttl_ms": 3_600_000}) == "unauthenticated"  # replayed
        assert code("human.login", {"sig": key.sign_login(None, 3_600_000, now_ms() - 12 * 60_000), "ttl_ms": 3_600_000}) == "unauthenticated"
        assert code("human.login", {"sig": {**key.sign_login(None, 60_000), "sig": "00" * 64}, "ttl_ms": 60_000}) == "unauthenticated"
        assert code("human.login", {"sig": key.sign_login(None, 60_000), "ttl_ms": 120_000}) == "unauthenticated"  # signed another ttl
        assert code("human.login", {"sig": key.sign_login(None, 10 ** 9), "ttl_ms": 10 ** 9}) == "invalid"
        assert code("human.login", {"sig": {**key.sign_login(None, 60_000), "nonce": "short"}, "ttl_ms": 60_000}) == "unauthenticated"
        op = session_op()
        forged = {**key.sign_op("demo", op), "sig": "11" * 64}
        with pytest.raises(LoncaError) as e:
            c.call("human.submit", {"op": op, "sig": forged}, repo="demo", token=htoken)
        assert e.value.code == "denied" and e.value.message.startswith("bad_human_signature")
        stale = key.sign_op("demo", op, now_ms() - 20 * 60_000)
        with pytest.raises(LoncaError) as e:
            c.call("human.submit", {"op": op, "sig": stale}, repo="demo", token=htoken)
        assert e.value.message.startswith("stale_human_signature")
        other_op = session_op()
        with pytest.raises(LoncaError) as e:  # signed for another repository
            c.call("human.submit", {"op": other_op, "sig": key.sign_op("other", other_op)}, repo="demo", token=htoken)
        assert e.value.message.startswith("bad_human_signature")
        good = key.sign_op("demo", op)
        c.call("human.submit", {"op": op, "sig": good}, repo="demo", token=htoken)
        op2 = session_op()
        with pytest.raises(LoncaError) as e:  # the same nonce again
            c.call("human.submit", {"op": op2, "sig": {**key.sign_op("demo", op2), "nonce": good["nonce"]}}, repo="demo", token=htoken)
        assert e.value.message.startswith("bad_human_signature")  # the nonce is inside what was signed
        from lonca import humansig
        replay = {**good, "sig": humansig.sign_ed25519(key.private, humansig.intent_bytes("demo", op2, good["nonce"], good["issued_ms"]))}
        with pytest.raises(LoncaError) as e:
            c.call("human.submit", {"op": op2, "sig": replay}, repo="demo", token=htoken)
        assert e.value.message.startswith("nonce_reused")
        assert code("human.submit", {"op": {"op": "teleport"}, "sig": key.sign_op("demo", {"op": "teleport"})}, repo="demo", token=htoken) == "invalid"
        bad_scope = session_op(scope={"paths": "everything"})
        assert code("human.submit", {"op": bad_scope, "sig": key.sign_op("demo", bad_scope)}, repo="demo", token=htoken) == "invalid"
        mallory = human_key("mallory")
        assert code("human.submit", {"op": op2, "sig": mallory.sign_op("demo", op2)}, repo="demo", token=htoken) == "forbidden"
        # repositories
        assert code("repo.prepare_init", {"repo": "demo", "human": "alice", "human_key": key.public}, token=htoken) == "conflict"
        assert code("repo.prepare_init", {"repo": "bad/name", "human": "alice", "human_key": key.public}, token=htoken) == "invalid"
        assert code("repo.prepare_init", {"repo": "x", "human": "alice", "human_key": key.public,
                                          "import_from": str(worker.home)}, token=htoken) == "forbidden"
        assert code("repo.prepare_init", {"repo": "x", "human": "alice", "human_key": key.public,
                                          "import_from": str(source_repo), "branch": "nope"}, token=htoken) == "git"
        assert code("repo.prepare_init", {"repo": "x", "human": "alice", "human_key": key.public}) == "unauthenticated"
        fake = {"op": "repo.init", "repo": "x", "daemon_key": "0" * 64, "human": "alice", "human_key": key.public,
                "policy": "0" * 40, "trunk": "0" * 40}
        assert code("repo.init", {"op": fake, "sig": key.sign_op("x", fake)}, token=htoken) == "invalid"
        # the one allowed submit above is the only new entry
        assert c.call("status", repo="demo", token=htoken)["next_seq"] == seq_before + 1
        assert c.call("ping")["protocol"] == 1  # the connection went on through all of it


def test_bootstrap_and_logins(keyed):
    worker, key = keyed
    with worker.client() as c:
        assert c.call("ping")["daemon_key"] == c.call("ping")["daemon_key"]
        assert c.call("ping")["bootstrap"] is True
        init_repo(c, key, "first")
        assert c.call("ping")["bootstrap"] is False
        bob = human_key("bob")
        with pytest.raises(LoncaError) as e:  # once a repository is served, bootstrap needs a human
            c.call("repo.prepare_init", {"repo": "second", "human": "bob", "human_key": bob.public})
        assert e.value.code == "unauthenticated"
        with pytest.raises(LoncaError) as e:  # bob is enrolled nowhere
            login(c, bob)
        assert e.value.code == "unauthenticated"
        htoken = login(c, key, repo="first")
        assert c.call("repo.list", token=htoken) == ["first"]
        who = c.call("whoami", token=htoken)
        assert who == {"actor": "human:alice", "human": "alice", "key": key.public["public"], "repos": ["first"]}
        assert c.call("human.logout", token=htoken) == {"ended": True}
        with pytest.raises(LoncaError) as e:
            c.call("repo.list", token=htoken)
        assert e.value.code == "unauthenticated"


def test_cli_init_login_status_doctor(worker, source_repo, tmp_path):
    out = worker.cli_json("init", "demo", "--import", str(source_repo), "--branch", "main")
    assert set(out) == {"repo", "trunk", "seq", "decision", "warnings", "profile", "branch"} and out["seq"] == 1
    key_file = tmp_path / "humans" / "alice.key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    login = worker.cli_json("human", "login")
    assert set(login) == {"human", "expires_ms", "session_file", "repos"} and login["repos"] == ["demo"]
    assert "lonca_" not in json.dumps(login)
    st = worker.cli("status", "--json", check=True)
    assert json.loads(st.stdout)["repo"] == "demo" and "lonca_h_" not in st.stdout
    doc = worker.cli_json("doctor")
    assert doc["ok"] and [c["name"] for c in doc["checks"]] == ["mode", "socket", "daemon", "git", "human", "log demo", "human demo", "frozen demo", "presence demo"]
    text_out = worker.cli("doctor", check=True).stdout
    assert "[✓] Log demo" in text_out and "\x1b[" not in text_out
    again = worker.cli("init", "demo", "--json")
    assert again.returncode == 1 and again.stdout == "" and again.stderr.startswith("conflict:")
    worker.stop()
    down = worker.cli("status", "--json")
    assert down.returncode == 2 and down.stdout == ""
    doc = worker.cli("doctor", "--json")
    assert doc.returncode == 1 and json.loads(doc.stdout)["ok"] is False


def test_log_and_doctor_read_every_page(make_worker, source_repo, monkeypatch):
    """A page of the log is as long as the worker says (LONCA_LOG_LIMIT_MAX): `lonca log` and
    `lonca doctor` read on to the end."""
    worker = make_worker({"LONCA_LOG_LIMIT_MAX": "2"})
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    worker.cli_json("init", "demo", "--import", str(source_repo), "--branch", "main")
    worker.cli_json("human", "login")
    key = human_key("alice")
    with worker.client() as c:
        htoken = login(c, key)
        for n in range(4):
            start_session(c, key, htoken, agent=f"agent-{n}")
    lines = worker.cli("log", "--json", check=True).stdout.splitlines()
    assert [json.loads(line)["entry"]["seq"] for line in lines] == [1, 2, 3, 4, 5]
    doc = worker.cli_json("doctor")
    assert next(c for c in doc["checks"] if c["name"] == "log demo")["detail"] == "5 entries verify"
