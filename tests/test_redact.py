"""redact (seed 001, "The key lifecycle"): a human's signed operation after which every read serves
the blob as null: tree and blobs answer null contents, change.diff leaves the file out and lists
it, change.get's evidence answers a redacted log as null, trunk.bundle refuses with `redacted`.
The set survives a restart, from a checkpoint and from a replay of the whole log. Real worker on a
real socket, real git store and check processes, SQLite and PostgreSQL."""
import base64

from conftest import git
from helpers import session_op
from lonca.protocol import LoncaError
from lonca.service import checkpoint
from test_checkpoints import sql
from test_human_change import prepare, wait_for

LOGGING_CHECK = "print('the check ran'); import sys; sys.exit(0)"


def refusal(fn) -> LoncaError:
    try:
        fn()
    except LoncaError as e:
        return e
    raise AssertionError("not refused")


def files_of(env, commit: str, **params) -> dict[str, dict]:
    got = env.client.call("tree", {"commit": commit, "with_content": False, "paths": None, **params},
                          repo="demo", token=env.token)
    return {f["path"]: f for f in got}


def redact(env, blob: str, reason: str = "a secret was committed") -> dict:
    return env.submit({"op": "redact", "blob": blob, "reason": reason})


def reads_of(env, commit: str, path: str) -> tuple:
    """What tree (with contents) and blobs serve for `path`."""
    tree = files_of(env, commit, with_content=True)[path]["content_b64"]
    page = env.client.call("blobs", {"commit": commit, "paths": [path]}, repo="demo", token=env.token)
    return tree, page[0]["content_b64"]


def test_a_redacted_blob_is_null_everywhere_and_stays_so_after_a_restart(repo_env):
    env = repo_env
    trunk = env.trunk
    blob = files_of(env, trunk)["app.py"]["blob"]
    util = files_of(env, trunk)["lib/util.py"]["blob"]
    assert all(reads_of(env, trunk, "app.py"))         # served before
    res = redact(env, blob)
    assert res["decision"] == {"outcome": "allow", "reasons": []} and res["blob"] == blob
    assert reads_of(env, trunk, "app.py") == (None, None)
    assert base64.b64decode(reads_of(env, trunk, "lib/util.py")[1]) == b"def helper():\n    return 42\n"
    assert files_of(env, trunk)["app.py"]["blob"] == blob  # the manifest still names it (no contents there)

    # a change that edits the redacted file: left out of files and diff, listed in redacted
    op = prepare(env, {"app.py": "def charge(amount):\n    return amount * 3\n", "NOTES.md": "# Notes\n"})["op"]
    assert env.submit(op)["decision"]["outcome"] == "allow"
    diff = env.client.call("change.diff", {"change": op["change"], "format": None}, repo="demo", token=env.token)
    assert diff["redacted"] == ["app.py"] and [f["path"] for f in diff["files"]] == ["NOTES.md"]
    assert "app.py" not in diff["diff"] and "amount * 2" not in diff["diff"] and "NOTES.md" in diff["diff"]

    # git needs whole objects: a bundle holding it is refused, one past it is not
    bundle = refusal(lambda: env.client.call("trunk.bundle", {"have": []}, repo="demo", token=env.token))
    assert bundle.code == "redacted" and blob in bundle.message
    wait_for(env, op["change"], "integrated")
    newer = env.client.call("trunk.bundle", {"have": [trunk]}, repo="demo", token=env.token)
    assert newer["thin"] and newer["bytes"] > 0

    # the CLI signs the same way (with alice's file key) and says so in JSON
    out = env.w.cli_json("redact", util, "--reason", "a token in a comment", "--repo", "demo")
    assert out["blob"] == util and out["decision"]["outcome"] == "allow"
    assert reads_of(env, trunk, "lib/util.py") == (None, None)

    # a clean stop saves a checkpoint (format 5 and later carry the set); the start resumes from it
    env.client.close()
    env.w.stop()
    assert sql(env.w, "SELECT format FROM checkpoints WHERE repo='demo'") == [(checkpoint.FORMAT,)]
    env.w.start()
    env.client = env.w.client().connect()
    assert reads_of(env, trunk, "app.py") == (None, None) == reads_of(env, trunk, "lib/util.py")
    # and a replay of the whole log (no checkpoint) builds the same set
    env.client.close()
    env.w.stop()
    sql(env.w, "DELETE FROM checkpoints")
    env.w.start()
    env.client = env.w.client().connect()
    assert reads_of(env, trunk, "app.py") == (None, None) == reads_of(env, trunk, "lib/util.py")
    assert env.client.call("change.diff", {"change": op["change"], "format": None}, repo="demo",
                           token=env.token)["redacted"] == ["app.py"]
    assert refusal(lambda: env.client.call("trunk.bundle", {"have": []}, repo="demo", token=env.token)).code == "redacted"
    kinds = [e["entry"]["op"]["op"] for e in env.log()]
    assert kinds.count("redact") == 2
    assert env.w.cli("audit", "verify").returncode == 0


def test_a_redacted_check_log_is_null_in_the_evidence(repo_env):
    env = repo_env
    env.policy('[verification]\ntests = ["python3", "-c", "%s"]\n' % LOGGING_CHECK)
    op = prepare(env, {"NOTES.md": "# Notes\n"})["op"]
    env.submit(op)
    got = wait_for(env, op["change"], "integrated")
    assert "the check ran" in next(e["log"] for e in got["evidence"] if e["check"] == "tests")
    entry = next(e["entry"] for e in env.log() if e["entry"]["op"]["op"] in ("change.integrate", "change.integrate_batch")
                 and e["entry"].get("evidence"))
    log_blob = next(a["log"] for a in entry["evidence"] if a["check"] == "tests")
    assert redact(env, log_blob, "the check printed a password")["decision"]["outcome"] == "allow"
    after = env.client.call("change.get", {"change": op["change"]}, repo="demo", token=env.token)
    assert next(e["log"] for e in after["evidence"] if e["check"] == "tests") is None


def test_what_redact_refuses(repo_env):
    env = repo_env
    trunk = env.trunk
    blob = files_of(env, trunk)["app.py"]["blob"]
    # a blob the store does not hold, an object that is not a blob, a blank reason: nothing logged
    before = env.status()["next_seq"]
    assert refusal(lambda: redact(env, "0" * 40)).code == "not_found"
    assert refusal(lambda: redact(env, trunk)).code == "invalid"
    assert refusal(lambda: redact(env, blob, " ")).code == "invalid"
    assert refusal(lambda: env.submit({"op": "redact", "blob": "XYZ", "reason": "x"})).code == "invalid"  # the edge
    # unsigned (a signature over another op) and by an agent's token
    sig = env.human.sign_op("demo", {"op": "redact", "blob": blob, "reason": "other"})
    forged = refusal(lambda: env.client.call("human.submit", {"op": {"op": "redact", "blob": blob, "reason": "x"}, "sig": sig},
                                             repo="demo", token=env.token))
    assert forged.code == "denied"
    start = session_op()
    agent = env.client.call("human.submit", {"op": start, "sig": env.human.sign_op("demo", start)}, repo="demo", token=env.token)
    op = {"op": "redact", "blob": blob, "reason": "x"}
    by_agent = refusal(lambda: env.client.call("human.submit", {"op": op, "sig": env.human.sign_op("demo", op)},
                                               repo="demo", token=agent["token"]))
    assert by_agent.code in ("forbidden", "unauthenticated")
    assert env.status()["next_seq"] == before + 1  # only the session.start was logged
    assert all(reads_of(env, trunk, "app.py"))
    # once redacted, again is invalid
    redact(env, blob)
    assert refusal(lambda: redact(env, blob)).code == "invalid"


def test_policy_cedar_and_presence_decide_redact(repo_env):
    env = repo_env
    trunk = env.trunk
    blob = files_of(env, trunk)["app.py"]["blob"]
    # policy.cedar asks redact on the Repo: a forbid is logged as denied and changes nothing
    cedar = ('permit(principal, action, resource);\n@id("keep-the-bytes")\n'
             'forbid(principal, action == Lonca::Action::"redact", resource);\n')
    op = env.client.call("human.prepare_policy", {"config": "", "policy": cedar}, repo="demo", token=env.token)["op"]
    assert env.submit(op)["decision"]["outcome"] == "allow"
    assert redact(env, blob)["decision"] == {"outcome": "deny", "reasons": ["policy_forbid:keep-the-bytes"]}
    assert all(reads_of(env, trunk, "app.py"))
    # [review] presence_required: a file key's redact is refused before anything is logged
    op = env.client.call("human.prepare_policy", {"config": "[review]\npresence_required = true\n",
                                                   "policy": "permit(principal, action, resource);\n"},
                         repo="demo", token=env.token)["op"]
    assert env.submit(op)["decision"]["outcome"] == "allow"
    denied = refusal(lambda: redact(env, blob))
    assert denied.code == "denied" and denied.message.startswith("presence_required"), denied
    assert all(reads_of(env, trunk, "app.py"))


def test_a_conflict_in_trunk_merge_does_not_send_the_redacted_trunk_side(repo_env):
    env = repo_env
    base = env.trunk
    op = prepare(env, {"app.py": "def charge(amount):\n    return amount * 4  # SECRET\n"})["op"]
    env.submit(op)
    wait_for(env, op["change"], "integrated")
    trunk = env.trunk
    redact(env, files_of(env, trunk)["app.py"]["blob"])
    agent = env.agent("merger")["token"]
    local = [{"path": "app.py", "content_b64": base64.b64encode(b"def charge(amount):\n    return amount * 5\n").decode(),
              "mode": None}]
    got = env.client.call("trunk.merge", {"base": base, "files": local}, token=agent)
    conflict, = got["conflicts"]
    # trunk's side, alone or inside conflict markers, is not sent: both are null (as for a binary file)
    assert conflict["path"] == "app.py" and conflict["trunk_b64"] is None and conflict["content_b64"] is None
    assert "SECRET" not in str(got)


def test_a_symbol_merge_with_a_redacted_trunk_side_is_not_sent(repo_env):
    env = repo_env
    base = env.trunk
    app = files_of(env, base, with_content=True)["app.py"]["content_b64"]
    text = base64.b64decode(app).decode()
    op = prepare(env, {"app.py": text.replace("amount * 2", "amount * 2  # SECRET")})["op"]
    env.submit(op)
    wait_for(env, op["change"], "integrated")
    redact(env, files_of(env, env.trunk)["app.py"]["blob"])
    agent = env.agent("merger")["token"]
    # another symbol of the same file: the symbol merge would answer trunk's charge, secret and all
    local = [{"path": "app.py", "content_b64": base64.b64encode(text.replace("charge(1)", "charge(2)").encode()).decode(),
              "mode": None}]
    got = env.client.call("trunk.merge", {"base": base, "files": local}, token=agent)
    assert got["conflicts"] == [{"path": "app.py", "symbols": [], "content_b64": None, "trunk_b64": None}]
    assert "SECRET" not in str(got) and "app.py" not in [f["path"] for f in got["files"]]


def test_a_push_never_hands_a_remote_a_redacted_blob_it_lacks(repo_env, tmp_path):
    """bridge.push sends git's objects whole: a remote that lacks a redacted blob trunk reaches is
    refused `redacted`, at the prepare and again at the submit (nothing logged); a remote that
    holds it already takes the push."""
    env = repo_env
    blob = files_of(env, env.trunk)["app.py"]["blob"]
    early, late = tmp_path / "early.git", tmp_path / "late.git"
    for remote in (early, late):
        git("init", "-q", "--bare", str(remote), cwd=tmp_path)

    def prepare_push(remote) -> dict:
        return env.client.call("human.prepare_push", {"remote": str(remote)}, repo="demo", token=env.token)["op"]

    assert "push" in env.submit(prepare_push(early))    # before the redaction: the remote takes it all
    pending = prepare_push(late)                         # prepared before, submitted after
    assert redact(env, blob)["decision"]["outcome"] == "allow"
    pushes = len(sql(env.w, "SELECT seq FROM log_entries WHERE repo='demo' AND entry LIKE '%\"bridge.push\"%'"))

    refused = refusal(lambda: env.submit(pending))
    assert refused.code == "redacted" and blob in refused.message
    refused = refusal(lambda: prepare_push(late))
    assert refused.code == "redacted" and blob in refused.message
    assert len(sql(env.w, "SELECT seq FROM log_entries WHERE repo='demo' AND entry LIKE '%\"bridge.push\"%'")) == pushes

    # the early remote holds the blob: a newer trunk goes there
    op = prepare(env, {"NOTES.md": "# Notes\n"})["op"]
    assert env.submit(op)["decision"]["outcome"] == "allow"
    wait_for(env, op["change"], "integrated")
    assert "refs/heads/main" in env.submit(prepare_push(early))["push"]
    assert git("cat-file", "-t", blob, cwd=early).strip() == "blob"
    assert git("for-each-ref", cwd=late).strip() == ""   # nothing went there
