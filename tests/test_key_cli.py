"""The key lifecycle from the CLI against a real worker (issue 14): `lonca human recovery-key`,
`rotate` (every repository the key is in, the key file replaced, the old key refused),
`recover` (no session: the recovery key signs), `revoke` and `revoke-session`, each with --json,
and `lonca audit verify` over the result."""
import stat
from pathlib import Path

import pytest

from conftest import git_repo
from helpers import human_key, login, start_session
from lonca.humankeys import HumanKey, load_key
from lonca.protocol import LoncaError


@pytest.fixture
def database_url():
    return None     # what is tested here is the CLI; the store tests run both databases


def test_rotate_recover_revoke_from_the_cli(worker, tmp_path, monkeypatch):
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    humans = Path(worker.env["LONCA_HUMANS"])
    src = git_repo(tmp_path / "src", {"app.py": "def charge(amount):\n    return amount * 2\n"})
    worker.cli_json("init", "demo", "--import", str(src))
    worker.cli_json("init", "other", "--import", str(src))
    bob = worker.cli("human", "key", "--human", "bob", check=True).stdout.strip()
    worker.cli_json("human", "enrol", "bob", "--public", bob, "--repo", "demo")
    first = human_key("alice")
    c = worker.client().connect()

    made = worker.cli_json("human", "recovery-key", "--repo", "demo")
    recovery_file = Path(made["recovery_key_file"])
    assert recovery_file == humans / "alice.recovery.key" and stat.S_IMODE(recovery_file.stat().st_mode) == 0o600
    assert worker.cli_json("status", "--repo", "demo")["humans"]["alice"]["recovery"] is not None

    rotated = worker.cli_json("human", "rotate")
    assert [r["repo"] for r in rotated["repos"]] == ["demo", "other"]
    second = load_key("alice")
    assert second.public["public"] == rotated["public"] != first.public["public"]
    assert not (humans / "alice.key.new").exists()
    for repo in ("demo", "other"):
        with pytest.raises(LoncaError) as e:
            login(c, first, repo=repo)
        assert e.value.code == "unauthenticated"
        assert worker.cli_json("status", "--repo", repo)["humans"]["alice"]["public"] == second.public["public"]

    # the key file is lost: the recovery key, moved elsewhere, recovers the name without a session
    offline = tmp_path / "usb" / "alice.recovery.key"
    offline.parent.mkdir()
    recovery_file.rename(offline)
    (humans / "alice.key").unlink()
    (humans / "alice.session").unlink(missing_ok=True)
    recovered = worker.cli_json("human", "recover", "--repo", "demo", "--recovery-key", str(offline))
    third = load_key("alice")
    # the session `lonca status` opened with the lost key ends too
    assert recovered["public"] == third.public["public"] and recovered["sessions_ended"] == 1
    spent = worker.cli("human", "recover", "--repo", "demo", "--recovery-key", str(offline), "--json")
    assert spent.returncode != 0 and "not_enrolled" in spent.stderr
    assert not (humans / "alice.key.new").exists()  # a refused recovery leaves no key behind
    assert load_key("alice").public == third.public

    # revoke bob; end an agent's session
    bob_token = login(c, HumanKey("bob", load_key("bob").private), repo="demo")
    revoked = worker.cli_json("human", "revoke", "bob", "--reason", "left the team", "--repo", "demo")
    assert revoked["sessions_ended"] == 1
    with pytest.raises(LoncaError):
        c.call("status", repo="demo", token=bob_token)
    agent = start_session(c, third, login(c, third, repo="demo"))
    ended = worker.cli_json("human", "revoke-session", agent["session"], "--reason", "token leaked", "--repo", "demo")
    assert ended["sessions_ended"] == [agent["session"]]
    with pytest.raises(LoncaError) as e:
        c.call("status", token=agent["token"])
    assert e.value.code == "unauthenticated"

    verified = worker.cli("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
