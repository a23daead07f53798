"""The CLI half of the newcomer's path (issue 12), against a real worker: a file key made and
printed to enrol, `init` of a further repository with an enrolled key, the source's default
branch found, another key enrolled from the CLI, and the workspace of a session a human started
elsewhere made from its token on stdin."""
import json
import stat
from pathlib import Path

import pytest

from conftest import git, git_repo
from helpers import human_key, login, start_session


@pytest.fixture
def database_url():
    return None     # what is tested here is the CLI; the store tests run both databases


def test_key_init_enrol_and_join(worker, tmp_path, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    src = git_repo(tmp_path / "src", {"app.py": "def charge(amount):\n    return amount * 2\n"})
    git("branch", "-m", "main", "develop", cwd=src)

    # the first repository: the source's default branch, not `main`
    first = worker.cli_json("init", "demo", "--import", str(src))
    assert first["branch"] == "develop" and first["trunk"] == git("rev-parse", "develop", cwd=src)
    named = worker.cli("init", "other", "--import", str(src), "--branch", "main")
    assert named.returncode == 1 and named.stderr.startswith("git:"), named.stderr

    # bob's file key: made once, printed with its fingerprint
    made = worker.cli_json("human", "key", "--human", "bob")
    again = worker.cli("human", "key", "--human", "bob", check=True)
    assert made["created"] is True and again.stdout.strip() == f"ed25519:{made['public']}"
    assert made["fingerprint"] in again.stderr
    key_file = Path(worker.env["LONCA_HUMANS"]) / "bob.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    # not enrolled: init says what to do, and nothing is created
    refused = worker.cli("init", "second", "--human", "bob")
    assert refused.returncode == 1 and "Is this key enrolled?" in refused.stderr and "lonca human key" in refused.stderr
    bad = worker.cli("human", "enrol", "bob", "--public", "ed25519:" + "0" * 64, "--repo", "demo")
    assert bad.returncode == 3 and "64 hex digits" in bad.stderr     # a small-order point is no key
    enrolled = worker.cli_json("human", "enrol", "bob", "--public", again.stdout.strip(), "--repo", "demo")
    assert enrolled["decision"]["outcome"] == "allow" and enrolled["fingerprint"] == made["fingerprint"]

    # enrolled, with no saved session: init logs in with the key and creates the repository
    assert not (Path(worker.env["LONCA_HUMANS"]) / "bob.session").exists()
    second = worker.cli_json("init", "second", "--human", "bob")
    assert second["decision"]["outcome"] == "allow" and second["branch"] is None
    hardened = worker.cli("init", "third", "--human", "bob", "--profile", "hardened")
    assert hardened.returncode == 1 and "presence_required" in hardened.stderr
    third = worker.cli_json("init", "third", "--human", "bob", "--profile", "hardened", "--without-presence")
    assert third["profile"] == "hardened"
    # alice's key, as it is in demo, enrolled in bob's repository by bob
    worker.cli_json("human", "enrol", "alice", "--as-in", "demo", "--repo", "second", "--human", "bob")
    assert sorted(worker.cli_json("status", "--repo", "second")["humans"]) == ["alice", "bob"]

    # a session started elsewhere (the console): its workspace from the token on stdin
    alice = human_key("alice")
    with worker.client() as c:
        htoken = login(c, alice)
        started = start_session(c, alice, htoken, repo="demo")
    token = started["token"]
    human_token = json.loads((Path(worker.env["LONCA_HUMANS"]) / "bob.session").read_text())["token"]
    wrong = worker.cli("session", "join", "--dir", "ws", input=human_token + "\n")
    assert wrong.returncode == 3 and "not an agent token" in wrong.stderr and not (tmp_path / "ws").exists()
    joined = worker.cli("session", "join", "--dir", "ws", "--json", input=token + "\n", check=True)
    out = json.loads(joined.stdout)
    ws = Path(out["workspace"])
    with worker.client() as c:
        assert out["session"] == c.call("whoami", token=token)["session"]["id"] and out["repo"] == "demo"
    assert token not in joined.stdout + joined.stderr
    assert stat.S_IMODE((ws / ".lonca" / "session").stat().st_mode) == 0o600
    assert (ws / "app.py").read_text() == "def charge(amount):\n    return amount * 2\n"
    st = json.loads(worker.cli("status", "--json", cwd=ws, check=True).stdout)    # read as the agent
    assert out["session"] in {s["id"] for s in st["sessions"]}
