"""Workspaces and the CLI for runners, end to end: session start, leases, propose, sync with the
symbol merge and its conflicts, heartbeat, end, pending / approve / reject. Real worker, real git."""
import json
import shutil
import time

import pytest

from test_leases import APP


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def repo(worker, source_repo):
    worker.cli_json("init", "demo", "--import", str(source_repo))
    return worker


def run(w, *args, cwd=None, code=0):
    res = w.cli(*args, cwd=cwd)
    assert res.returncode == code, (args, res.stdout, res.stderr)
    assert "lonca_" not in res.stdout and "lonca_" not in res.stderr  # no token, ever
    return json.loads(res.stdout) if "--json" in args and res.stdout else res


def wait_trunk_has(w, text, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = run(w, "status", "--json")
        if all(c["status"]["status"] not in ("queued",) for c in st["changes"]):
            ws = w.tmp / "probe"
            if ws.exists():
                shutil.rmtree(ws)
            run(w, "workspace", "create", "--dir", str(ws), "--json")
            if text in (ws / "app.py").read_text():
                return st
        time.sleep(0.2)
    raise AssertionError(f"trunk never had {text!r}")


def test_session_lease_propose_sync_end(repo, tmp_path):
    w = repo
    a = run(w, "session", "start", "--agent", "alpha", "--dir", str(tmp_path / "a"), "--json")
    run(w, "session", "start", "--agent", "beta", "--dir", str(tmp_path / "b"), "--json")
    assert set(a) >= {"session", "workspace", "expires_ms", "paths", "scratch", "seq", "decision"}
    wa, wb = tmp_path / "a", tmp_path / "b"
    token_file = wa / ".lonca" / "session"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600" and (wa / "app.py").read_text() == APP
    got = run(w, "lease", "acquire", "app.py#charge", "--intent", "triple it", "--json", cwd=wa)
    assert set(got) == {"seq", "decision", "set", "details", "warnings"} and got["decision"]["outcome"] == "allow"
    assert got["warnings"] == []
    held = run(w, "lease", "acquire", "app.py#charge", "--intent", "me too", "--json", cwd=wb, code=1)
    assert held["decision"]["outcome"] == "deny" and held["details"][0]["holder_agent"] == "alpha"
    run(w, "lease", "acquire", "app.py#Client.pay", "--intent", "pay twice", "--json", cwd=wb)
    (wa / "app.py").write_text(APP.replace("amount * 2", "amount * 3"))
    pa = run(w, "propose", "-m", "triple the fee", "--json", cwd=wa)
    assert set(pa) == {"change", "commit", "seq", "decision", "status", "details"} and pa["status"] == "queued"
    wait_trunk_has(w, "amount * 3")
    (wb / "app.py").write_text(APP.replace("charge(1)", "charge(2)"))
    s = run(w, "sync", "--json", cwd=wb)
    # the seed's fields, and `redacted` (trunk's files left out: docs/decisions.md, issue 14)
    assert set(s) == {"base_before", "base_after", "updated", "merged", "conflicts", "redacted"}
    assert s["base_before"] != s["base_after"] and s["updated"] == ["app.py"] and s["conflicts"] == []
    text = (wb / "app.py").read_text()
    assert "amount * 3" in text and "charge(2)" in text  # trunk came in, the local edit stayed
    pb = run(w, "propose", "-m", "pay twice", "--json", cwd=wb)
    assert pb["decision"]["outcome"] == "allow", pb
    wait_trunk_has(w, "charge(2)")
    hb = run(w, "session", "heartbeat", "--json", cwd=wa)
    assert set(hb) == {"session", "seq", "timeout_ms", "leases"} and hb["session"] == a["session"]
    ev = run(w, "events", "--from", "1", "--json", cwd=wa)
    assert any(e["kind"] == "integrated" and e["change"] == pa["change"] for e in ev["events"])
    end = run(w, "session", "end", "--json", cwd=wa)
    assert set(end) == {"session", "seq", "decision"}
    gone = w.cli("session", "heartbeat", "--json", cwd=wa)
    # the token is gone with the session: the daemon refuses (exit 1), as the seed says (issue 16)
    assert gone.returncode == 1 and gone.stdout == "" and gone.stderr.startswith("unauthenticated:")


def test_sync_conflict_markers_and_propose_refusing(repo, tmp_path):
    w = repo
    run(w, "session", "start", "--agent", "alpha", "--dir", str(tmp_path / "a"), "--json")
    run(w, "session", "start", "--agent", "beta", "--dir", str(tmp_path / "b"), "--json")
    wa, wb = tmp_path / "a", tmp_path / "b"
    lease = run(w, "lease", "acquire", "app.py#charge", "--intent", "x", "--json", cwd=wa)
    (wa / "app.py").write_text(APP.replace("amount * 2", "amount * 3"))
    run(w, "propose", "-m", "x", "--json", cwd=wa)
    wait_trunk_has(w, "amount * 3")
    (wb / "app.py").write_text(APP.replace("amount * 2", "amount - 1"))
    s = run(w, "sync", "--json", cwd=wb)
    assert s["conflicts"] == [{"path": "app.py", "trunk_copy": "app.py.trunk", "symbols": ["app.py#charge"]}]
    text = (wb / "app.py").read_text()
    assert "<<<<<<< local" in text and "amount - 1" in text and "amount * 3" in text and ">>>>>>> trunk" in text
    assert "amount * 3" in (wb / "app.py.trunk").read_text()
    refused = w.cli("propose", "--json", cwd=wb)
    assert refused.returncode == 3 and refused.stdout == "" and "conflict markers" in refused.stderr
    again = run(w, "sync", "--json", cwd=wb)  # a later sync reports the conflict again
    assert again["base_before"] == again["base_after"]
    (wb / "app.py").write_text(APP.replace("amount * 2", "amount * 3 - 1"))  # resolved by hand
    run(w, "sync", "--json", cwd=wb)
    assert not (wb / "app.py.trunk").exists()  # the next sync removes trunk's copy
    run(w, "lease", "release", lease["set"], "--json", cwd=wa)
    run(w, "lease", "acquire", "app.py#charge", "--intent", "resolve", "--json", cwd=wb)
    resolved = run(w, "propose", "-m", "minus one", "--json", cwd=wb)
    assert resolved["decision"]["outcome"] == "allow"
    wait_trunk_has(w, "amount * 3 - 1")


def test_pending_approve_reject_from_the_cli(repo, tmp_path):
    w = repo
    run(w, "session", "start", "--agent", "alpha", "--dir", str(tmp_path / "a"), "--json")
    wa = tmp_path / "a"
    run(w, "lease", "acquire", "lonca.toml#<file>", "--intent", "policy", "--json", cwd=wa)
    (wa / "lonca.toml").write_text("[leases]\nshared = true\n")
    p = run(w, "propose", "-m", "share leases", "--json", cwd=wa)
    assert p["status"] == "pending" and p["decision"]["outcome"] == "escalate"
    pending = run(w, "pending", "--json")
    assert pending[0]["change"] == p["change"] and pending[0]["intent"] == "share leases"
    r = run(w, "reject", str(pending[0]["seq"]), "--reason", "not now", "--json")
    assert set(r) == {"seq", "target_seq", "change", "decision"} and r["change"] == p["change"]
    p2 = run(w, "propose", "-m", "share leases, please", "--json", cwd=wa)
    seq = run(w, "pending", "--json")[0]["seq"]
    ok = run(w, "approve", str(seq), "--note", "fine", "--json")
    assert ok["decision"]["outcome"] == "allow" and ok["change"] == p2["change"]
    bad = w.cli("approve", str(seq), "--json")  # no longer pending: a denial exits 1
    assert bad.returncode == 1 and json.loads(bad.stdout)["decision"]["reasons"] == ["not_pending"]
    assert bad.stderr.startswith("denied: not_pending")


def test_json_shapes_of_the_other_commands(repo, tmp_path):
    w = repo
    who = run(w, "human", "whoami", "--json")
    assert set(who) == {"human", "alg", "public"} and who["alg"] == "ed25519"
    a = run(w, "session", "start", "--agent", "alpha", "--dir", str(tmp_path / "a"), "--json")
    run(w, "session", "start", "--agent", "beta", "--dir", str(tmp_path / "b"), "--json")
    wa, wb = tmp_path / "a", tmp_path / "b"
    got = run(w, "lease", "acquire", "app.py#charge", "--intent", "x", "--json", cwd=wa)
    renewed = run(w, "lease", "renew", got["set"], "--ttl-ms", "60000", "--json", cwd=wa)
    assert set(renewed) == {"seq", "decision", "set", "details"} and renewed["decision"]["outcome"] == "allow"
    wait = run(w, "lease", "interest", "app.py#charge", "--intent", "after you", "--json", cwd=wb)
    assert set(wait) == {"seq", "decision", "set", "details"} and wait["set"] is None
    assert wait["details"][0]["holder_session"] == a["session"]
    released = run(w, "lease", "release", got["set"], "--json", cwd=wa)
    assert released["decision"]["outcome"] == "allow"
    ev = run(w, "events", "--json", cwd=wb)
    assert set(ev) == {"events", "next"} and any(e["kind"] == "reserved" for e in ev["events"])
    ins = run(w, "lease", "acquire", "app.py#Client", "--kind", "insert", "--names", "refund,void", "--intent", "y", "--json", cwd=wb)
    assert ins["decision"]["outcome"] == "allow"
    ws = run(w, "workspace", "create", "--dir", str(tmp_path / "ro"), "--json")
    assert set(ws) == {"workspace", "repo", "base", "redacted"} and ws["redacted"] == [] and (tmp_path / "ro" / "app.py").exists()
    nothing = w.cli("propose", "--json", cwd=wa)
    assert nothing.returncode == 3 and nothing.stdout == "" and "no local changes" in nothing.stderr
    outside = w.cli("propose", "--json", cwd=tmp_path)
    assert outside.returncode == 3 and "not in a Lonca workspace" in outside.stderr
