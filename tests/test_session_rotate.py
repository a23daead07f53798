"""session.rotate and `lonca session rotate` (seed 001): a new token in the workspace, the old one
dead at once and after a restart, nothing in the log."""
import json
import os
import stat

import pytest

from lonca.protocol import LoncaError


@pytest.fixture
def database_url():
    """SQLite only: the tokens table is the store's, exercised on both engines elsewhere."""
    return None


def test_rotate_replaces_the_token_in_the_workspace_and_the_old_one_stops_at_once(repo_env, tmp_path):
    w = repo_env.w
    ws = tmp_path / "ws"
    assert w.cli("session", "start", "--repo", "demo", "--agent", "ada", "--dir", str(ws), "--json").returncode == 0
    token_file = ws / ".lonca" / "session"
    old = json.loads(token_file.read_text())
    seq = repo_env.status()["next_seq"]
    res = w.cli("session", "rotate", "--json", cwd=ws)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["token_file"] == str(token_file) and "lonca_" not in res.stdout + res.stderr
    new = json.loads(token_file.read_text())
    assert new["token"] != old["token"] and new["expires_ms"] == old["expires_ms"]
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    with pytest.raises(LoncaError) as e:
        repo_env.client.call("whoami", {}, token=old["token"])
    assert e.value.code == "unauthenticated"
    assert repo_env.client.call("whoami", {}, token=new["token"])["session"]["id"] == out["session"]
    # the workspace's commands use the new token; nothing was logged, and no log entry holds a token
    assert w.cli("session", "heartbeat", "--json", cwd=ws).returncode == 0
    assert repo_env.status()["next_seq"] == seq + 1      # the heartbeat's entry only
    entries = repo_env.client.call("log", {"from": 1}, repo="demo", token=repo_env.token)
    assert old["token"] not in json.dumps(entries) and new["token"] not in json.dumps(entries)
    # a restart reads the tokens from the database: the new one lives, the old one stays dead
    w.stop()
    w.start()
    repo_env.client = w.client().connect()
    assert repo_env.client.call("whoami", {}, token=new["token"])["session"]["id"] == out["session"]
    with pytest.raises(LoncaError) as e:
        repo_env.client.call("session.rotate", {}, token=old["token"])
    assert e.value.code == "unauthenticated"
    with pytest.raises(LoncaError) as e:
        repo_env.client.call("session.rotate", {"extra": 1}, token=new["token"])
    assert e.value.code == "invalid"
