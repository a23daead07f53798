"""An agent on the CLI, with nothing but its workspace's token: it reads its repository (status,
log, pending, symbols), previews its changes, and settles a conflict with negotiate, in the seed's
shapes and exit codes (0 done, 1 refused, 3 usage). A yielded set arrives held, with no advice to
acquire it again; a lease on what trunk does not have is granted with a warning."""
import json
import subprocess
import sys

import pytest

from test_leases import APP


def cli(worker, *args, cwd, code=0, humans=None, lines=False, env=None):
    """`lonca ARGS` in `cwd`; `humans` replaces the folder of human keys (an empty one: no key).
    With --json, the one JSON value printed (or with `lines`, one per line)."""
    env = {**worker.env, **({"LONCA_HUMANS": str(humans)} if humans else {}), **(env or {})}
    res = subprocess.run([sys.executable, "-m", "lonca", *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == code, (args, res.returncode, res.stdout, res.stderr)
    assert "lonca_" not in res.stdout + res.stderr  # no token, ever
    if lines:
        return [json.loads(line) for line in res.stdout.splitlines()]
    return json.loads(res.stdout) if "--json" in args and res.stdout else res


@pytest.fixture
def keyless(tmp_path):
    """A folder of human keys with none in it: what an agent's shell has."""
    d = tmp_path / "no-humans"
    d.mkdir(mode=0o700)
    return d


def test_an_agent_reads_its_repository_with_its_own_token(repo, agent, keyless, tmp_path):
    ws, sid = agent("alpha")
    st = cli(repo, "status", "--json", cwd=ws, humans=keyless)
    assert st["repo"] == "demo" and any(s["id"] == sid for s in st["sessions"])
    assert "alpha" in cli(repo, "status", cwd=ws, humans=keyless).stdout
    entries = cli(repo, "log", "--json", cwd=ws, humans=keyless, lines=True)
    assert [e["entry"]["seq"] for e in entries] == list(range(1, st["next_seq"]))
    assert cli(repo, "log", "--from", "2", cwd=ws, humans=keyless).stdout.splitlines()[0].split()[0] == "2"
    assert cli(repo, "pending", "--json", cwd=ws, humans=keyless) == st["pending"] == []
    sym = cli(repo, "symbols", "app.py", "--json", cwd=ws, humans=keyless)
    assert sym["path"] == "app.py" and sym["commit"] == st["trunk"]
    assert {s["id"] for s in sym["symbols"]} >= {"app.py#charge", "app.py#Client", "app.py#Client.pay"}
    assert "app.py#Client.pay" in cli(repo, "symbols", "app.py", cwd=ws, humans=keyless).stdout
    # what trunk does not have is the daemon's not_found (exit 1); a human still reads as before
    assert cli(repo, "symbols", "nope.py", "--json", cwd=ws, humans=keyless, code=1).stderr.startswith("not_found:")
    assert cli(repo, "symbols", "app.py", "--json", cwd=tmp_path)["symbols"] == sym["symbols"]
    # outside a workspace and without a key: usage (3), and the message does not send an agent to `init`
    res = cli(repo, "status", cwd=tmp_path, humans=keyless, code=3)
    assert "workspace" in res.stderr and "agent" in res.stderr
    # an ended session's workspace has no token any more: a human key is what reads then
    cli(repo, "session", "end", cwd=ws)
    cli(repo, "status", cwd=ws, humans=keyless, code=3)
    assert cli(repo, "status", "--json", cwd=ws)["repo"] == "demo"


def test_preview_shows_the_facts_and_the_leases_they_need(repo, agent, keyless):
    ws, sid = agent("alpha")
    other, _ = agent("beta")
    res = cli(repo, "preview", "--json", cwd=ws, humans=keyless, code=3)
    assert res.stdout == "" and "no local changes" in res.stderr
    (ws / "app.py").write_text(APP.replace("amount * 2", "amount * 3"))
    pre = cli(repo, "preview", "--json", cwd=ws, humans=keyless)
    assert set(pre) >= {"facts", "syntax_errors", "leases", "acquire"}
    assert pre["facts"]["edits"] == ["app.py#charge"] and pre["acquire"] == [{"symbol": "app.py#charge", "kind": "edit"}]
    assert [d["code"] for d in pre["leases"]] == ["free"]
    assert "lonca lease acquire 'app.py#charge'" in cli(repo, "preview", cwd=ws, humans=keyless).stdout
    cli(repo, "lease", "acquire", "app.py#charge", "--intent", "triple it", "--json", cwd=other)
    held = cli(repo, "preview", "--json", cwd=ws, humans=keyless)
    assert held["acquire"] == [] and held["leases"][0]["code"] == "lease_held"
    assert held["leases"][0]["holder_agent"] == "beta"
    # the holder's own preview: its lease is its own, with nobody to settle with (no "held by None")
    (other / "app.py").write_text(APP.replace("amount * 2", "amount * 4"))
    mine = cli(repo, "preview", "--json", cwd=other, humans=keyless)
    assert [(d["code"], d["holder_agent"]) for d in mine["leases"]] == [("held_by_you", "beta")]
    assert mine["advice"] is None and mine["acquire"] == []
    assert cli(repo, "preview", cwd=other, humans=keyless).stderr == ""
    # the daemon out of reach: 2, for each of the agent's new commands
    gone = {"LONCA_SOCKET": str(ws / "no.sock")}
    for args in (["preview"], ["symbols", "app.py"], ["negotiate", sid, "accept"], ["status"]):
        res = cli(repo, *args, "--json", cwd=other, humans=keyless, env=gone, code=2)
        assert res.stdout == "" and res.stderr.startswith("unreachable:")


def test_negotiate_yield_hands_the_set_over_once(repo, agent, keyless):
    wa, a = agent("alpha")
    wb, b = agent("beta")
    got = cli(repo, "lease", "acquire", "app.py#charge", "--intent", "triple it", "--json", cwd=wa)
    cli(repo, "lease", "acquire", "app.py#charge", "--intent", "me too", "--json", cwd=wb, code=1)
    cli(repo, "lease", "interest", "app.py#charge", "--intent", "me too", "--json", cwd=wb)
    claim = cli(repo, "negotiate", a, "claim", "--symbols", "app.py#charge", "--reason", "I fix the rounding",
                "--json", cwd=wb, humans=keyless)
    assert set(claim) == {"seq", "decision", "thread"} and claim["decision"]["outcome"] == "allow"
    given = cli(repo, "negotiate", b, "yield", "--set", got["set"], "--thread", claim["thread"], "--json",
                cwd=wa, humans=keyless)
    assert given["decision"]["outcome"] == "allow" and given["thread"] == claim["thread"]
    st = cli(repo, "status", "--json", cwd=wb, humans=keyless)
    assert [(ls["set"], ls["session"]) for ls in st["leases"]] == [(got["set"], b)]  # moved, not copied
    assert st["reservations"] == [] and st["interests"] == []  # nothing left telling beta to acquire it
    inbox = repo.client().call("inbox", token=json.loads((wb / ".lonca" / "session").read_text())["token"])
    assert [e["kind"] for e in inbox["events"]] == ["message", "lease_received"]
    assert "hold it now" in inbox["text"] and "acquire it now" not in inbox["text"]
    # beta edits and proposes under the set it was given, with no second acquire
    (wb / "app.py").write_text(APP.replace("amount * 2", "round(amount * 2, 2)"))
    assert cli(repo, "propose", "-m", "round the fee", "--json", cwd=wb)["status"] == "queued"
    # refusals: a set that is not yours (1, with the reason), a message missing its field (3)
    denied = cli(repo, "negotiate", a, "yield", "--set", got["set"], "--json", cwd=wa, code=1)
    assert denied["decision"]["reasons"] == ["not_own_lease"]
    assert "--note" in cli(repo, "negotiate", a, "decline", cwd=wb, code=3).stderr
    assert "--set" in cli(repo, "negotiate", a, "accept", "--set", got["set"], cwd=wb, code=3).stderr
    assert cli(repo, "negotiate", "s-nobody", "accept", "--json", cwd=wb, code=1)["decision"]["reasons"] == ["unknown_session"]


def test_a_lease_on_what_trunk_does_not_have_is_granted_with_a_warning(repo, agent):
    ws, _ = agent()

    def acquire(symbol: str, kind: str = "edit") -> list[str]:
        got = cli(repo, "lease", "acquire", symbol, "--kind", kind, "--intent", "x", "--json", cwd=ws)
        assert got["decision"]["outcome"] == "allow", got
        return got["warnings"]

    for present in ("app.py#charge", "app.py#Client.<def>", "app.py#<file>", "lib/util.py#helper"):
        assert acquire(present) == [], present
    assert acquire("app.py#Client", "insert") == []
    assert acquire("new.py#<file>") == []  # a file the change adds: what the seed asks for
    [missing] = acquire("app.py#chrage")
    assert missing.startswith("app.py#chrage:") and "lonca symbols app.py" in missing
    [container] = acquire("app.py#Ledger", "insert")
    assert "no container" in container
    [nofile] = acquire("ghost.py#run")
    assert "ghost.py is not a file on trunk" in nofile and "ghost.py#<file>" in nofile
    res = cli(repo, "lease", "acquire", "app.py#chrage", "--intent", "x", cwd=ws)
    assert "warning: app.py#chrage:" in res.stderr
