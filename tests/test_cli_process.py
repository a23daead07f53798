"""The `lonca` process itself: its exit codes (seed 001, "CLI for runners"; issue 16) and what a
plain command imports (issue 17)."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.mark.parametrize("argv", [
    ["--bogus"],                                   # an option nobody takes
    ["lease", "acquire"],                          # a required argument missing
    ["approve", "seven"],                          # a value of the wrong type
    ["lease", "acquire", "a.py#f", "--kind", "steal"],  # a choice not offered
    ["session", "frobnicate"],                     # an unknown subcommand
])
def test_usage_errors_exit_3_not_2(argv, tmp_path):
    """argparse's own 2 is the seed's "daemon unreachable", which a harness retries."""
    res = subprocess.run([sys.executable, "-m", "lonca", *argv, "--json"], capture_output=True, text=True,
                         cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "LONCA_HOME": str(tmp_path)}, timeout=60)
    assert res.returncode == 3, res
    assert res.stdout == "" and "error:" in res.stderr


def test_heartbeat_after_end_exits_1_with_the_seeds_code(make_worker, source_repo, tmp_path):
    # tokens of ended sessions are swept after an hour here, so the first heartbeat meets the session
    w = make_worker({"LONCA_TOKEN_SWEEP_S": "3600"})
    w.cli_json("init", "demo", "--import", str(source_repo))
    ws = tmp_path / "ws"
    w.cli_json("session", "start", "--agent", "ada", "--dir", str(ws))
    token = (ws / ".lonca" / "session").read_bytes()
    assert w.cli("session", "heartbeat", "--json", cwd=ws).returncode == 0
    w.cli("session", "end", "--json", cwd=ws, check=True)
    gone = w.cli("session", "heartbeat", "--json", cwd=ws)  # the workspace no longer holds a token
    assert (gone.returncode, gone.stdout) == (1, "") and gone.stderr.startswith("unauthenticated:"), gone
    plain = w.cli("session", "heartbeat", cwd=ws)
    assert (plain.returncode, plain.stdout) == (1, "") and plain.stderr.startswith("unauthenticated:")
    kept = ws / ".lonca" / "session"  # a runner that kept the token: the daemon knows the session is over
    kept.write_bytes(token)
    kept.chmod(0o600)
    over = w.cli("session", "heartbeat", "--json", cwd=ws)
    assert (over.returncode, over.stdout) == (1, "") and over.stderr.startswith("session_inactive:"), over
    assert "lonca_" not in over.stderr + gone.stderr


@pytest.mark.parametrize("argv", [["--help"], ["status", "--json"], ["human", "whoami", "--json"]])
def test_a_plain_command_imports_no_webauthn(argv, tmp_path):
    """py_webauthn costs about 0.2 s of start-up: only a browser key's check imports it."""
    probe = ("import runpy, sys\nsys.argv = ['lonca'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('lonca', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "import json\nprint(json.dumps(sorted(m for m in ('webauthn', 'lonca.webauthn', 'pygit2', 'mcp') "
             "if m in sys.modules)), file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "LONCA_HOME": str(tmp_path), "LONCA_HUMANS": str(tmp_path)})
    assert json.loads(res.stderr.strip().splitlines()[-1]) == [], res.stderr


def test_importing_the_cli_imports_no_webauthn():
    res = subprocess.run([sys.executable, "-c", "import sys, lonca.cli; print(sorted(m for m in sys.modules "
                          "if m.split('.')[0] in ('webauthn', 'pygit2', 'mcp') or m == 'lonca.webauthn'))"],
                         capture_output=True, text=True, cwd=ROOT.parent, timeout=60, check=True)
    assert res.stdout.strip() == "[]"
