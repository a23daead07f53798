"""A hardened install is detected (seed 001, ping.hardened: "its uid named in the root-owned
daemon.toml"): the worker reads the install file at start (lonca/install.py; LONCA_DAEMON_TOML
points it at one in a temporary folder, held to the same rules). On a hardened daemon
repo.prepare_init defaults to the hardened profile, status.below_hardened says what a repository
leaves below it, and a file key's write is refused presence_required. A file writable by others,
not root's, in a folder others can write, or naming another uid makes no hardened daemon, and
`lonca doctor` says why. Real workers on real sockets; needs root, to make root-owned files (as
CI's container runs)."""
import json
import os
from pathlib import Path

import pytest

from helpers import human_key, login, session_op
from lonca.protocol import LoncaError

NOBODY = 65534


@pytest.fixture
def database_url():
    return None  # the install file is what is tested


@pytest.fixture
def install_dir(tmp_path) -> Path:
    if os.getuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("root-owned install files need root in CI")
        pytest.skip("root-owned install files need root")
    folder = tmp_path / "etc-lonca"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    return folder


def write_install(folder: Path, uid: int, mode: int = 0o644) -> Path:
    path = folder / "daemon.toml"
    path.write_text(f"daemon_uid = {uid}\n")
    path.chmod(mode)
    return path


def doctor(w) -> dict:
    """`lonca doctor --json` in the worker's environment (its install file included)."""
    out = w.cli("doctor", "--json")
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def mode_check(report: dict) -> dict:
    return next(c for c in report["checks"] if c["name"] == "mode")


def prepare(c, key, repo: str, token: str | None = None, **extra) -> dict:
    return c.call("repo.prepare_init", {"repo": repo, "human": key.name, "human_key": key.public, **extra}, token=token)


def test_a_hardened_daemon_defaults_to_the_hardened_profile(make_worker, install_dir, monkeypatch):
    path = write_install(install_dir, os.getuid())
    w = make_worker({"LONCA_DAEMON_TOML": str(path)})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    key = human_key("alice")
    c = w.client().connect()
    assert c.call("ping")["hardened"] is True
    assert f"mode hardened: {path} names this daemon's uid" in w.output.read_text()

    with pytest.raises(LoncaError) as e:  # the default profile is hardened, and a file key proves no presence
        prepare(c, key, "demo")
    assert e.value.code == "invalid" and "this hardened daemon's default" in e.value.message
    prepared = prepare(c, key, "demo", without_presence=True)
    assert prepared["profile"] == "hardened" and prepared["op"]["profile"] == "hardened"
    c.call("repo.init", {"op": prepared["op"], "sig": key.sign_op("demo", prepared["op"])})
    token = login(c, key)
    st = c.call("status", repo="demo", token=token)
    assert st["profile"] == "hardened" and st["below_hardened"] == ["file_key:alice"]

    op = session_op()  # the hardened profile always requires presence: a file key's write is refused
    with pytest.raises(LoncaError) as e:
        c.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token)
    assert e.value.code == "denied" and e.value.message.startswith("presence_required: the hardened profile")
    assert c.call("status", repo="demo", token=token)["next_seq"] == st["next_seq"]  # nothing logged

    cooperative = prepare(c, key, "coop", token, profile="cooperative")  # asked for: below hardened, and says so
    c.call("repo.init", {"op": cooperative["op"], "sig": key.sign_op("coop", cooperative["op"])}, token=token)
    assert c.call("status", repo="coop", token=token)["below_hardened"] == ["profile:cooperative", "file_key:alice"]
    c.close()

    report = doctor(w)
    assert report["mode"] == "hardened" and mode_check(report)["level"] == "pass"


def test_without_an_install_file_the_daemon_is_cooperative(make_worker, tmp_path, monkeypatch):
    w = make_worker({"LONCA_DAEMON_TOML": str(tmp_path / "no-such" / "daemon.toml")})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    key = human_key("alice")
    c = w.client().connect()
    assert c.call("ping")["hardened"] is False
    prepared = prepare(c, key, "demo")
    assert prepared["profile"] == "cooperative"
    c.call("repo.init", {"op": prepared["op"], "sig": key.sign_op("demo", prepared["op"])})
    assert c.call("status", repo="demo", token=login(c, key))["below_hardened"] == []  # always empty here
    c.close()
    report = doctor(w)
    assert report["mode"] == "cooperative" and mode_check(report)["level"] == "pass"


@pytest.mark.parametrize("case, why", [
    ("writable by others", "the file {path} is writable by group or others"),
    ("not root's", "the file {path} belongs to uid 65534, not root"),
    ("folder writable by others", "its folder {folder} is writable by group or others"),
    ("names another uid", "{path} names uid 65534 as the daemon's, but {sock} belongs to uid 0"),
])
def test_an_install_file_not_to_be_trusted_makes_no_hardened_daemon(make_worker, install_dir, case, why):
    path = write_install(install_dir, NOBODY if case == "names another uid" else os.getuid(),
                         0o666 if case == "writable by others" else 0o644)
    if case == "not root's":
        os.chown(path, NOBODY, -1)
    if case == "folder writable by others":
        install_dir.chmod(0o777)
    w = make_worker({"LONCA_DAEMON_TOML": str(path)})
    with w.client() as c:  # this test's client reads no install file: it expects its own uid
        assert c.call("ping")["hardened"] is False
    assert "mode not hardened: " in w.output.read_text()
    report = doctor(w)  # doctor reads the worker's install file, as every client there does
    check = mode_check(report)
    assert report["mode"] is None and report["ok"] is False and check["level"] == "fail"
    assert check["detail"].startswith("not hardened: ")
    assert why.format(path=path, folder=install_dir, sock=w.socket) in check["detail"], check["detail"]
    assert check["hint"]
    socket = next(c for c in report["checks"] if c["name"] == "socket")  # no client trusts it either
    assert socket["level"] == "fail" and socket["hint"] == "mend the install file first (Mode)"
