"""`lonca up --demo` enrols every key registered in the console, so it is refused on an interface
other than loopback unless --demo-public says so (with a warning). Refusing happens before the
worker starts or anything is bound, so the test needs no public address."""
import os
import subprocess
import sys

from lonca.console_commands import loopback_only
from lonca.output import USAGE


def up(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    env = {**os.environ, "LONCA_HOME": str(home), "LONCA_HUMANS": str(tmp_path / "humans")}
    return subprocess.run([sys.executable, "-m", "lonca", "up", "--port", "1", *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_demo_is_refused_off_loopback_without_the_flag(tmp_path):
    for host in ("0.0.0.0", "::"):
        res = up(tmp_path, "--demo", "--host", host, "--origin", "https://review.example.com")
        assert res.returncode == USAGE, res
        assert f"{host} is not a loopback interface" in res.stderr and "--demo-public" in res.stderr, res.stderr
        assert not (tmp_path / "home").exists() or not list((tmp_path / "home").iterdir())  # no worker started

    # --demo-public passes this check with a warning; an http origin off localhost is refused next,
    # still before anything starts
    res = up(tmp_path, "--demo-public", "--host", "0.0.0.0")
    assert res.returncode == USAGE
    assert "warning: the demo on 0.0.0.0 enrols anyone who registers" in res.stderr, res.stderr
    assert "WebAuthn needs https" in res.stderr


def test_which_hosts_are_loopback():
    assert all(loopback_only(h) for h in ("localhost", "127.0.0.1", "127.1.2.3", "::1"))
    assert not any(loopback_only(h) for h in ("0.0.0.0", "::", "192.0.2.1", "no-such-host.invalid"))
