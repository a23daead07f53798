"""Bridges to the forge over a real worker: human.prepare_import / import.external and
human.prepare_push / bridge.push against a real OpenSSH server and a real smart-HTTP server
(tests/forge.py), a plain path, and trunk moved in the store outside Lonca (import.unmediated)."""
import json
import time

import pytest

from conftest import git, git_repo
import forge as forges
from forge import HTTP_PASSWORD
from helpers import acquire, human_key, init_repo, login, start_session
from lonca.protocol import LoncaError


@pytest.fixture
def database_url():
    return None     # what is tested here is git against remotes; the store tests run both databases


@pytest.fixture
def ssh_forge(tmp_path):
    with forges.ssh_forge(tmp_path) as f:
        yield f


@pytest.fixture
def https_forge(tmp_path):
    with forges.https_forge(tmp_path) as f:
        yield f


def upstream(tmp_path, forge_repo) -> object:
    """A developer's clone of the forge's repository (filled from a first commit), through the
    file system: what the forge holds is set up outside the worker."""
    work = git_repo(tmp_path / "dev", {"app.py": "def charge(amount):\n    return amount * 2\n\n\ndef refund(x):\n    return x\n"})
    git("push", "-q", str(forge_repo), "main:main", cwd=work)
    return work


def commit(work, path: str, text: str, message: str) -> str:
    (work / path).write_text(text)
    git("commit", "-qam", message, cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


def started(make_worker, forge, monkeypatch):
    w = make_worker(forge.env if forge else None)
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    return w


def alice_imports(make_worker, monkeypatch, dev):
    """A worker whose repository `demo` alice made by importing `dev`: (worker, client, key, token)."""
    w = started(make_worker, None, monkeypatch)
    key = human_key("alice")
    c = w.client().connect()
    init_repo(c, key, "demo", import_from=str(dev))
    return w, c, key, login(c, key)


def submit(c, key, token, op):
    return c.call("human.submit", {"op": op, "sig": key.sign_op("demo", op)}, repo="demo", token=token)


def entries(c, token, kind):
    return [e["entry"] for e in c.call("log", {"from": 1}, repo="demo", token=token) if e["entry"]["op"]["op"] == kind]


def bridge_round(w, forge, tmp_path, url_of):
    """Init from the remote, import, up to date, push to an empty repository, not fast-forward
    both ways, unreachable; no password anywhere in the log or the worker's output."""
    dev = upstream(tmp_path, forge.repo("app"))
    key = human_key("alice")
    c = w.client().connect()
    first = init_repo(c, key, "demo", import_from=url_of("app"))  # repo.init's import_from, over the same remote
    assert first["op"]["trunk"] == git("rev-parse", "HEAD", cwd=dev)
    token = login(c, key)
    head = commit(dev, "app.py", "def charge(amount):\n    return amount * 3\n\n\ndef refund(x):\n    return x\n", "upstream")
    git("push", "-q", str(forge.root / "app.git"), "main:main", cwd=dev)

    # import, with the CLI: trunk is upstream's commit, and the log names remote and commit
    out = w.cli_json("import", url_of("app"))
    assert out["decision"]["outcome"] == "allow" and out["commit"] == head
    assert c.call("status", repo="demo", token=token)["trunk"] == head
    [entry] = entries(c, token, "import.external")
    assert entry["op"]["remote"] == url_of("app") and entry["actor"] == {"kind": "human", "name": "alice"}
    with pytest.raises(LoncaError) as e:
        c.call("human.prepare_import", {"remote": url_of("app"), "branch": None}, repo="demo", token=token)
    assert e.value.code == "up_to_date"

    # push to an empty repository of the forge: git's porcelain output, the entry logged
    forge.repo("mirror")
    out = w.cli_json("push", url_of("mirror"))
    assert out["decision"]["outcome"] == "allow" and "refs/heads/main" in out["push"] and "[new branch]" in out["push"]
    assert "refs/lonca/log" in out["push"] and "refs/lonca/policy" in out["push"]
    assert git("--git-dir", str(forge.root / "mirror.git"), "rev-parse", "main", cwd=tmp_path) == head
    assert entries(c, token, "bridge.push")[0]["op"]["remote"] == url_of("mirror")

    # upstream diverges from trunk: import is not_fast_forward, a push is git's refusal and its entry stands
    git("reset", "-q", "--hard", "HEAD~1", cwd=dev)
    commit(dev, "app.py", "def charge(amount):\n    return 0\n", "diverged")
    git("push", "-q", "-f", str(forge.root / "app.git"), "main:main", cwd=dev)
    with pytest.raises(LoncaError) as e:
        c.call("human.prepare_import", {"remote": url_of("app"), "branch": "main"}, repo="demo", token=token)
    assert e.value.code == "not_fast_forward"
    op = c.call("human.prepare_push", {"remote": url_of("app")}, repo="demo", token=token)["op"]
    with pytest.raises(LoncaError) as e:
        submit(c, key, token, op)
    assert e.value.code == "git" and "rejected" in e.value.message and "stands" in e.value.message
    refs = git("--git-dir", str(forge.root / "app.git"), "for-each-ref", "--format=%(refname)", cwd=tmp_path)
    assert refs == "refs/heads/main"  # --atomic: the log and policy refs did not go without trunk
    assert len(entries(c, token, "bridge.push")) == 2

    # nothing answers: git, for import and push alike; the push entry stands
    for method in ("human.prepare_import", "human.prepare_push"):
        params = {"remote": url_of("app", gone=True)} | ({} if method.endswith("push") else {"branch": None})
        with pytest.raises(LoncaError) as e:
            submit(c, key, token, c.call(method, params, repo="demo", token=token)["op"])
        assert e.value.code == "git"
    assert len(entries(c, token, "bridge.push")) == 3
    log_text = json.dumps(c.call("log", {"from": 1}, repo="demo", token=token))
    assert HTTP_PASSWORD not in log_text and HTTP_PASSWORD not in w.output.read_text(errors="replace")
    c.close()


def test_import_and_push_over_ssh(make_worker, ssh_forge, tmp_path, monkeypatch):
    w = started(make_worker, ssh_forge, monkeypatch)
    bridge_round(w, ssh_forge, tmp_path, ssh_forge.url_of)


def test_import_and_push_over_ssh_scp_form(make_worker, ssh_forge, tmp_path, monkeypatch):
    w = started(make_worker, ssh_forge, monkeypatch)
    bridge_round(w, ssh_forge, tmp_path, lambda name, gone=False: ssh_forge.url_of(name, scp=True, gone=gone))


def test_import_and_push_over_https(make_worker, https_forge, tmp_path, monkeypatch):
    w = started(make_worker, https_forge, monkeypatch)
    bridge_round(w, https_forge, tmp_path, https_forge.url_of)


def test_import_tells_leases_and_moves_sessions_trunk(make_worker, tmp_path, monkeypatch):
    """A plain path: a session holding a lease on a symbol the import changes hears of it
    (symbols_changed, in events and inbox), and its next proposal is on the new trunk."""
    dev = git_repo(tmp_path / "dev", {"app.py": "def charge(amount):\n    return amount * 2\n\n\ndef refund(x):\n    return x\n"})
    w, c, key, token = alice_imports(make_worker, monkeypatch, dev)
    agent = start_session(c, key, token)["token"]
    other = start_session(c, key, token, agent="agent-2")["token"]
    held = acquire(c, agent, "app.py#charge")["set"]
    acquire(c, other, "app.py#refund")
    head = commit(dev, "app.py", "def charge(amount, fee):\n    return amount * 2 + fee\n\n\ndef refund(x):\n    return x\n", "fee")
    op = c.call("human.prepare_import", {"remote": str(dev), "branch": "main"}, repo="demo", token=token)["op"]
    assert op == {"op": "import.external", "remote": str(dev), "commit": head, "trunk_before": op["trunk_before"]}
    res = submit(c, key, token, op)
    assert res["decision"]["outcome"] == "allow" and res["trunk"] == head
    assert any(r.startswith("affected_lease:") and r.endswith(held) for r in res["decision"]["reasons"])
    events = c.call("events", {"from": 0}, token=agent)["events"]
    [told] = [e for e in events if e["kind"] == "symbols_changed"]
    assert told["sets"] == [held] and "app.py#charge" in told["symbols"] and told["change"] is None
    assert "import from upstream" in c.call("inbox", token=agent)["text"]
    assert not [e for e in c.call("events", {"from": 0}, token=other)["events"] if e["kind"] == "symbols_changed"]
    assert c.call("status", repo="demo", token=token)["trunk"] == head
    assert git("--git-dir", str(w.home / "repos" / "demo.git"), "rev-parse", "main", cwd=tmp_path) == head
    assert c.call("trunk.distance", {"base": op["trunk_before"]}, token=agent)["behind"] == 1

    # the same signed op again: trunk moved since it was prepared
    with pytest.raises(LoncaError) as e:
        submit(c, key, token, op)
    assert e.value.code == "not_fast_forward"
    c.close()


def test_remotes_refused(make_worker, tmp_path, monkeypatch):
    dev = git_repo(tmp_path / "dev", {"a.txt": "a\n"})
    w, c, key, token = alice_imports(make_worker, monkeypatch, dev)
    cases = [("https://me:hunter2@example.invalid/r.git", "invalid"), ("ssh://me:hunter2@example.invalid/r.git", "invalid"),
             (str(w.home / "repos" / "demo.git"), "forbidden"), ("relative/path", "invalid"),
             ("-uhack@host:x", "invalid"), ("http://example.invalid/r.git", "invalid"),
             (str(tmp_path / "nothing-here"), "git")]
    for remote, code in cases:
        for method, params in (("human.prepare_import", {"remote": remote}), ("human.prepare_push", {"remote": remote})):
            with pytest.raises(LoncaError) as e:
                c.call(method, params, repo="demo", token=token)
            assert e.value.code == code, (method, remote, e.value)
            assert "hunter2" not in e.value.message
    # a signed op this daemon did not prepare (here: a push whose log head is made up)
    op = {"op": "bridge.push", "remote": str(dev), "oplog_seq": 1, "oplog_hash": "0" * 64}
    with pytest.raises(LoncaError) as e:
        submit(c, key, token, op)
    assert e.value.code == "invalid" and "human.prepare_push" in e.value.message
    assert not entries(c, token, "bridge.push")

    # a signature replayed, or made for another repository, is refused and logs nothing
    mirror = tmp_path / "mirror.git"
    git("init", "-q", "--bare", str(mirror), cwd=tmp_path)
    op = c.call("human.prepare_push", {"remote": str(mirror)}, repo="demo", token=token)["op"]
    with pytest.raises(LoncaError) as e:
        c.call("human.submit", {"op": op, "sig": key.sign_op("other", op)}, repo="demo", token=token)
    assert e.value.code == "denied"
    sig = key.sign_op("demo", op)
    assert c.call("human.submit", {"op": op, "sig": sig}, repo="demo", token=token)["decision"]["outcome"] == "allow"
    with pytest.raises(LoncaError) as e:
        c.call("human.submit", {"op": op, "sig": sig}, repo="demo", token=token)
    assert e.value.code == "denied" and "nonce" in e.value.message
    assert len(entries(c, token, "bridge.push")) == 1
    c.close()


def test_trunk_moved_outside_lonca_is_logged_not_adopted(make_worker, tmp_path, monkeypatch):
    """Someone moves trunk's ref in the store with git: the worker logs import.unmediated
    (refname, found, expected; refused not_adopted), keeps the commit under
    refs/lonca/unmediated/ and sets trunk back; status never shows the commit as trunk."""
    dev = git_repo(tmp_path / "dev", {"a.txt": "a\n"})
    w, c, key, token = alice_imports(make_worker, monkeypatch, dev)
    trunk = c.call("status", repo="demo", token=token)["trunk"]
    sneaked = commit(dev, "a.txt", "b\n", "behind Lonca's back")
    store = w.home / "repos" / "demo.git"
    git("push", "-q", "-f", str(store), "main:main", cwd=dev)
    deadline = time.monotonic() + 20
    while not (found := entries(c, token, "import.unmediated")) and time.monotonic() < deadline:
        time.sleep(0.1)
    [entry] = found
    assert entry["op"] == {"op": "import.unmediated", "refname": "refs/heads/main", "found": sneaked, "expected": trunk}
    assert entry["actor"] == {"kind": "daemon"} and entry["decision"] == {"outcome": "deny", "reasons": ["not_adopted"]}
    assert c.call("status", repo="demo", token=token)["trunk"] == trunk
    assert git("--git-dir", str(store), "rev-parse", "main", cwd=tmp_path) == trunk
    assert git("--git-dir", str(store), "rev-parse", f"refs/lonca/unmediated/{sneaked}", cwd=tmp_path) == sneaked
    time.sleep(2.5)  # another wake of the queue: logged once
    assert len(entries(c, token, "import.unmediated")) == 1
    c.close()

    # a restart finds the same: the log replays, audit verify passes
    w.stop()
    git("push", "-q", "-f", str(store), "main:main", cwd=dev)
    w.start()
    c = w.client().connect()
    token = login(c, key)
    deadline = time.monotonic() + 20
    while len(entries(c, token, "import.unmediated")) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(entries(c, token, "import.unmediated")) == 2
    assert c.call("status", repo="demo", token=token)["trunk"] == trunk
    c.close()
    assert w.cli("audit", "verify").returncode == 0


def test_local_roots_and_import_dir(make_worker, tmp_path, monkeypatch):
    """--local-root: local remotes only under those folders; --import-dir: a bundle directly in
    it is read from a copy, a link or anything below it is forbidden, and so is a push there."""
    allowed, drop = tmp_path / "allowed", tmp_path / "drop"
    allowed.mkdir()
    (drop / "sub").mkdir(parents=True)
    w = make_worker({"LONCA_LOCAL_ROOT": str(allowed), "LONCA_IMPORT_DIR": str(drop)})
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    dev = git_repo(allowed / "dev", {"a.txt": "a\n"})
    outside = git_repo(tmp_path / "outside", {"a.txt": "a\n"})
    key = human_key("alice")
    c = w.client().connect()
    with pytest.raises(LoncaError) as e:
        init_repo(c, key, "demo", import_from=str(outside))
    assert e.value.code == "forbidden" and "--local-root" in e.value.message
    init_repo(c, key, "demo", import_from=str(dev))
    token = login(c, key)

    head = commit(dev, "a.txt", "b\n", "upstream")
    git("bundle", "create", "-q", str(drop / "up.bundle"), "main", cwd=dev)
    (drop / "link.bundle").symlink_to(drop / "up.bundle")
    git("bundle", "create", "-q", str(drop / "sub" / "deep.bundle"), "main", cwd=dev)
    for remote in (drop / "link.bundle", drop / "sub" / "deep.bundle", drop / "sub", outside):
        with pytest.raises(LoncaError) as e:
            c.call("human.prepare_import", {"remote": str(remote)}, repo="demo", token=token)
        assert e.value.code == "forbidden", remote
    for remote in (drop / "up.bundle", drop / "new.git"):
        with pytest.raises(LoncaError) as e:
            c.call("human.prepare_push", {"remote": str(remote)}, repo="demo", token=token)
        assert e.value.code == "forbidden", remote

    op = c.call("human.prepare_import", {"remote": str(drop / "up.bundle")}, repo="demo", token=token)["op"]
    assert op["commit"] == head and submit(c, key, token, op)["decision"]["outcome"] == "allow"
    assert c.call("status", repo="demo", token=token)["trunk"] == head
    assert sorted(p.name for p in drop.iterdir()) == ["link.bundle", "sub", "up.bundle"]  # the copy is gone
    assert not list((w.home / "repos").glob("*.bundle"))
    c.close()


def test_an_import_without_a_branch_takes_main(make_worker, tmp_path, monkeypatch):
    """Seed 001: import_from fetches "branch (default main)", and bridge.push pushes to main: an
    import that names no branch takes main, whatever the remote's HEAD names; a remote without
    main says to name the branch."""
    dev = git_repo(tmp_path / "dev", {"a.txt": "a\n"})
    w, c, key, token = alice_imports(make_worker, monkeypatch, dev)
    on_main = commit(dev, "a.txt", "b\n", "on main")
    git("checkout", "-qb", "develop", cwd=dev)  # the remote's HEAD names develop from here on
    commit(dev, "a.txt", "c\n", "on develop")
    op = c.call("human.prepare_import", {"remote": str(dev), "branch": None}, repo="demo", token=token)["op"]
    assert op["commit"] == on_main

    bare = tmp_path / "no-main.git"
    git("clone", "-q", "--bare", "--single-branch", "-b", "develop", str(dev), str(bare), cwd=tmp_path)
    with pytest.raises(LoncaError) as e:
        c.call("human.prepare_import", {"remote": str(bare)}, repo="demo", token=token)
    assert e.value.code == "git" and "refs/heads/main" in e.value.message and "--branch" in e.value.message
    c.close()
