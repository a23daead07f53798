"""A workspace of a trunk whose history holds a redacted blob (seed 001, trunk.bundle: `redacted`,
"git needs whole objects, work from a workspace"): `lonca session start`, `lonca workspace create`
and `lonca sync` build it from tree and blobs as one commit of trunk's tree with no history, the
redacted files left out and named. The loop goes on through it: lease, edit, propose, integrated,
sync, two rounds; trunk's later redacted files leave the workspace, its later readable ones come
in. Real CLI, real worker on a real socket, real git, SQLite and PostgreSQL."""
import json
import subprocess

from helpers import acquire, propose
from test_human_change import prepare, wait_for
from test_redact import files_of, redact, refusal
from test_sync_loop import git_out, run

SECRET = "def charge(amount):\n    return amount * 2  # key=sk_live_SECRET\n"


def on_disk(ws) -> set[str]:
    return {str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts and ".lonca" not in p.parts}


def meta(ws) -> dict:
    return json.loads((ws / ".lonca" / "workspace.json").read_text())


def secret_on_trunk(env) -> str:
    """A human's change puts a secret into app.py; once integrated, its blob is redacted. Trunk's
    history then holds the blob for good: trunk.bundle refuses every bundle from the start."""
    op = prepare(env, {"app.py": SECRET})["op"]
    env.submit(op)
    wait_for(env, op["change"], "integrated")
    blob = files_of(env, env.trunk)["app.py"]["blob"]
    assert redact(env, blob)["decision"]["outcome"] == "allow"
    assert refusal(lambda: env.client.call("trunk.bundle", {"have": []}, repo="demo", token=env.token)).code == "redacted"
    return blob


def assert_trunk_less(ws, trunk_files: set[str], left_out: set[str]) -> None:
    """The checkout holds trunk's files but the redacted ones, clean, at one commit with no history."""
    assert on_disk(ws) == trunk_files - left_out
    assert git_out(ws, "status", "--porcelain", "--untracked-files=all") == ""
    assert git_out(ws, "rev-list", "--count", "HEAD").strip() == "1"
    assert "SECRET" not in subprocess.run(["git", "-C", str(ws), "grep", "-I", "SECRET", "HEAD"],
                                          capture_output=True, text=True).stdout


def test_an_agent_works_two_rounds_in_a_workspace_built_from_tree_and_blobs(repo_env, tmp_path):
    env, w = repo_env, repo_env.w
    blob = secret_on_trunk(env)
    ws = tmp_path / "ws"
    started = run(w, "session", "start", "--agent", "fixer", "--dir", str(ws), "--json")
    trunk = env.trunk
    assert meta(ws)["base"] == trunk and meta(ws)["redacted"] == ["app.py"] and meta(ws)["head"] != trunk
    assert_trunk_less(ws, set(files_of(env, trunk)), {"app.py"})
    assert subprocess.run(["git", "-C", str(ws), "cat-file", "-e", blob]).returncode != 0   # never fetched

    # round 1: lease, edit, propose (the base is trunk's id, not the local commit), integrated
    run(w, "lease", "acquire", "lib/util.py#helper", "--intent", "helper returns 43", "--json", cwd=ws)
    (ws / "lib" / "util.py").write_text("def helper():\n    return 43\n")
    assert git_out(ws, "status", "--porcelain") == " M lib/util.py\n"
    p = run(w, "propose", "-m", "helper returns 43", "--json", cwd=ws)
    assert p["status"] == "queued", p
    got = wait_for(env, p["change"], "integrated")
    assert got["base"] == trunk and got["paths"] == ["lib/util.py"]
    # meanwhile a human puts a readable app.py back, and a secret into README.md, which is redacted
    op = prepare(env, {"app.py": "def charge(amount):\n    return amount * 3\n", "README.md": "# Demo\n\ntoken=SECRET2\n"})["op"]
    env.submit(op)
    wait_for(env, op["change"], "integrated")
    redact(env, files_of(env, env.trunk)["README.md"]["blob"])
    s = run(w, "sync", "--json", cwd=ws)
    trunk = env.trunk
    assert s["base_after"] == trunk and s["conflicts"] == [] and s["redacted"] == ["README.md"]
    assert meta(ws)["base"] == trunk and meta(ws)["redacted"] == ["README.md"]
    assert_trunk_less(ws, set(files_of(env, trunk)), {"README.md"})
    assert (ws / "app.py").read_text() == "def charge(amount):\n    return amount * 3\n"
    assert (ws / "lib" / "util.py").read_text() == "def helper():\n    return 43\n"

    # round 2: the same loop on the new base; a new file beside the redacted one's folder
    run(w, "lease", "acquire", "app.py#charge", "--intent", "charge triples plus one", "--json", cwd=ws)
    (ws / "app.py").write_text("def charge(amount):\n    return amount * 3 + 1\n")
    (ws / "lib" / "more.py").write_text("def more():\n    return 2\n")
    run(w, "lease", "acquire", "lib/more.py#<file>", "--intent", "a new module", "--json", cwd=ws)
    p = run(w, "propose", "-m", "charge plus one", "--json", cwd=ws)
    assert p["status"] == "queued", p
    got = wait_for(env, p["change"], "integrated")
    assert got["base"] == trunk and got["paths"] == ["app.py", "lib/more.py"]
    # another agent moves trunk; sync brings its file in and leaves this one's own as they are
    other = env.agent("other")
    assert acquire(env.client, other["token"], "lib/extra.py#<file>", intent="an extra module")["decision"]["outcome"] == "allow"
    q = propose(env.client, other["token"], env.trunk, {"lib/extra.py": "def extra():\n    return 44\n"})
    wait_for(env, q["change"], "integrated")
    s = run(w, "sync", "--json", cwd=ws)
    trunk = env.trunk
    assert s["base_after"] == trunk and s["conflicts"] == [] and s["redacted"] == ["README.md"]
    assert_trunk_less(ws, set(files_of(env, trunk)), {"README.md"})
    assert (ws / "lib" / "extra.py").read_text() == "def extra():\n    return 44\n"
    assert (ws / "app.py").read_text() == "def charge(amount):\n    return amount * 3 + 1\n"
    assert run(w, "sync", "--json", cwd=ws)["base_after"] == trunk      # up to date: nothing asked of git
    assert started["session"] in {x["id"] for x in env.status()["sessions"]}


def test_workspace_create_names_the_redacted_files_and_a_rewritten_one_is_proposed(repo_env, tmp_path):
    env, w = repo_env, repo_env.w
    secret_on_trunk(env)
    w.env["LONCA_FETCH_BUDGET"] = "48"     # pages sized from the manifest: a file or two a page, app.py alone
    ws = tmp_path / "mine"
    out = run(w, "workspace", "create", "--dir", str(ws), "--json")
    assert out == {"workspace": str(ws), "repo": "demo", "base": env.trunk, "redacted": ["app.py"]}
    assert_trunk_less(ws, set(files_of(env, env.trunk)), {"app.py"})
    text = w.cli("workspace", "create", "--dir", str(tmp_path / "again"), check=True)
    assert "built from tree and blobs" in text.stdout and "redacted and left out" in text.stderr and "app.py" in text.stderr
    # the human writes app.py anew (the secret out): an added file here, a modification of trunk's
    (ws / "app.py").write_text("import os\n\n\ndef charge(amount):\n    return amount * int(os.environ['RATE'])\n")
    p = run(w, "propose", "-m", "the rate from the environment", "--json", cwd=ws)
    got = wait_for(env, p["change"], "integrated")
    assert got["paths"] == ["app.py"] and got["facts"]["modified_files"] == ["app.py"]
    diff = env.client.call("change.diff", {"change": p["change"], "format": None}, repo="demo", token=env.token)
    assert diff["redacted"] == ["app.py"] and "SECRET" not in diff["diff"]
    # the human's sync: trunk's app.py is readable now, so it is trunk's and nothing is left out
    s = run(w, "sync", "--json", cwd=ws)
    assert s["base_after"] == env.trunk and s["redacted"] == [] and s["conflicts"] == []
    assert git_out(ws, "status", "--porcelain", "--untracked-files=all") == ""
    assert "RATE" in (ws / "app.py").read_text()


def test_a_workspace_of_bundles_goes_on_from_tree_and_blobs_when_a_redacted_blob_is_in_the_way(repo_env, tmp_path):
    """An agent's workspace fetched trunk before the secret came; the secret lands and is redacted:
    the bundle past the workspace's base is refused, so sync builds trunk from tree and blobs."""
    env, w = repo_env, repo_env.w
    ws = tmp_path / "ws"
    run(w, "session", "start", "--agent", "early", "--dir", str(ws), "--json")
    assert meta(ws)["head"] is None and git_out(ws, "rev-parse", "HEAD").strip() == env.trunk
    (ws / "NOTES.md").write_text("# Notes\n")          # a local change that the sync keeps
    secret_on_trunk(env)
    s = run(w, "sync", "--json", cwd=ws)
    assert s["base_after"] == env.trunk and s["redacted"] == ["app.py"]
    assert not (ws / "app.py").exists() and (ws / "NOTES.md").read_text() == "# Notes\n"
    assert git_out(ws, "status", "--porcelain", "--untracked-files=all") == "?? NOTES.md\n"
    assert meta(ws)["head"] == git_out(ws, "rev-parse", "HEAD").strip() != env.trunk
    run(w, "lease", "acquire", "NOTES.md#<file>", "--intent", "notes", "--json", cwd=ws)
    p = run(w, "propose", "-m", "notes", "--json", cwd=ws)
    assert wait_for(env, p["change"], "integrated")["paths"] == ["NOTES.md"]


def test_a_redacted_blob_past_the_page_budget_still_lets_a_workspace_be_built(make_worker, source_repo, monkeypatch, tmp_path):
    """blobs and tree count no room for a redacted blob (it is answered null), so a big leaked
    file does not stop a workspace: it is asked for alone and left out."""
    from helpers import RepoEnv
    w = make_worker({"LONCA_BIG_LINE_MAX": "200000"})     # a page holds 150 000 bytes of base64
    monkeypatch.setenv("LONCA_HUMANS", w.env["LONCA_HUMANS"])
    env = RepoEnv(w, source_repo)
    try:
        dump = "".join(f"row_{i} = 'secret {i}'\n" for i in range(5600))   # 137 780 bytes: 183 708 of base64
        op = prepare(env, {"dump.py": dump})["op"]
        env.submit(op)
        wait_for(env, op["change"], "integrated")
        trunk = env.trunk
        assert refusal(lambda: env.client.call("blobs", {"commit": trunk, "paths": ["dump.py"]}, repo="demo",
                                               token=env.token)).code == "too_large"
        redact(env, files_of(env, trunk)["dump.py"]["blob"])
        assert env.client.call("blobs", {"commit": trunk, "paths": ["dump.py", "app.py"]}, repo="demo",
                               token=env.token)[0]["content_b64"] is None
        tree = env.client.call("tree", {"commit": trunk, "with_content": True, "paths": None}, repo="demo", token=env.token)
        assert {f["path"]: f["content_b64"] is None for f in tree}["dump.py"]
        w.env["LONCA_FETCH_BUDGET"] = "150000"
        out = run(w, "workspace", "create", "--dir", str(tmp_path / "ws"), "--json")
        assert out["redacted"] == ["dump.py"] and not (tmp_path / "ws" / "dump.py").exists()
        assert (tmp_path / "ws" / "app.py").exists()
    finally:
        env.client.close()
