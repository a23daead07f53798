"""redact (seed 001, "The key lifecycle"): a human's signed operation after which every read serves
the blob as null: tree and blobs answer null contents, change.diff leaves the file out and lists
it, change.get's evidence answers a redacted log as null, trunk.bundle refuses with `redacted`.
The set survives a restart, from a checkpoint and from a replay of the whole log. Real worker on a
real socket, real git store and check processes, SQLite and PostgreSQL."""
import base64
import json

from conftest import git
from helpers import acquire, propose, session_op
from lonca.protocol import LoncaError, claim_from_facts
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


def land(env, changes: dict) -> dict:
    """A human's change of `changes`, submitted and integrated: the change as change.get reads it."""
    op = prepare(env, changes)["op"]
    env.submit(op)
    return wait_for(env, op["change"], "integrated")


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
    assert bundle.code == "redacted" and blob in bundle.message, (bundle.code, bundle.message)
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
    got = land(env, {"NOTES.md": "# Notes\n"})
    assert "the check ran" in next(e["log"] for e in got["evidence"] if e["check"] == "tests")
    entry = next(e["entry"] for e in env.log() if e["entry"]["op"]["op"] in ("change.integrate", "change.integrate_batch")
                 and e["entry"].get("evidence"))
    log_blob = next(a["log"] for a in entry["evidence"] if a["check"] == "tests")
    assert redact(env, log_blob, "the check printed a password")["decision"]["outcome"] == "allow"
    after = env.client.call("change.get", {"change": got["change"]}, repo="demo", token=env.token)
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
    land(env, {"app.py": "def charge(amount):\n    return amount * 4  # SECRET\n"})
    trunk = env.trunk
    redact(env, files_of(env, trunk)["app.py"]["blob"])
    agent = env.agent("merger")["token"]
    local = [{"path": "app.py", "content_b64": base64.b64encode(b"def charge(amount):\n    return amount * 5\n").decode(),
              "mode": None}]
    # an agent's sync and a human's (trunk.merge is a read): the same guard
    for got in (env.client.call("trunk.merge", {"base": base, "files": local}, token=agent),
                env.client.call("trunk.merge", {"base": base, "files": local}, repo="demo", token=env.token)):
        conflict, = got["conflicts"]
        # trunk's side, alone or inside conflict markers, is not sent: both are null (as for a binary file)
        assert conflict["path"] == "app.py" and conflict["trunk_b64"] is None and conflict["content_b64"] is None
        assert conflict["symbols"] == []    # names are read from trunk's side too
        assert "SECRET" not in str(got)


def test_a_symbol_merge_with_a_redacted_trunk_side_is_not_sent(repo_env):
    env = repo_env
    base = env.trunk
    app = files_of(env, base, with_content=True)["app.py"]["content_b64"]
    text = base64.b64decode(app).decode()
    land(env, {"app.py": text.replace("amount * 2", "amount * 2  # SECRET")})
    redact(env, files_of(env, env.trunk)["app.py"]["blob"])
    agent = env.agent("merger")["token"]
    # another symbol of the same file: the symbol merge would answer trunk's charge, secret and all
    local = [{"path": "app.py", "content_b64": base64.b64encode(text.replace("charge(1)", "charge(2)").encode()).decode(),
              "mode": None}]
    for got in (env.client.call("trunk.merge", {"base": base, "files": local}, token=agent),
                env.client.call("trunk.merge", {"base": base, "files": local}, repo="demo", token=env.token)):
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


def test_symbols_has_no_table_of_a_redacted_blob(repo_env):
    """symbols reads names and lines from a blob's contents: of a redacted blob it answers none,
    at trunk and at an older commit that holds it, to an agent and to a human, from the CLI too."""
    env = repo_env
    base = env.trunk
    land(env, {"app.py": "def charge(amount):\n    return amount * 2\n\n\ndef sk_live_SECRET():\n    pass\n"})
    trunk = env.trunk
    agent = env.agent("reader")["token"]
    ask = {"path": "app.py", "commit": None}
    assert "app.py#sk_live_SECRET" in [s["id"] for s in env.client.call("symbols", ask, token=agent)["symbols"]]
    redact(env, files_of(env, trunk)["app.py"]["blob"])
    for got in (env.client.call("symbols", ask, token=agent), env.client.call("symbols", ask, repo="demo", token=env.token),
                env.w.cli_json("symbols", "app.py", "--repo", "demo")):
        assert got == {"path": "app.py", "commit": trunk, "language": "python", "status": "redacted", "symbols": [],
                       "syntax_errors": []}
    # the older blob of app.py is not redacted: its table is served, and other files' too
    older = [s["id"] for s in env.client.call("symbols", {"path": "app.py", "commit": base}, token=agent)["symbols"]]
    assert "app.py#Client.pay" in older and "app.py#sk_live_SECRET" not in older
    assert env.client.call("symbols", {"path": "lib/util.py", "commit": None}, token=agent)["status"] == "parsed"


def test_facts_and_lease_answers_read_nothing_of_a_redacted_blob(repo_env):
    """facts.preview, change.propose (its answer and its log entry), human.prepare_change and
    lease.acquire's warnings derive names and line counts from contents: a redacted blob is one
    whole file of no lines to them (opaque), so none of its symbols is named, counted, `affected`
    or told apart by a lease's warning."""
    env = repo_env
    secret = "def charge(amount):\n    return amount * 2\n\n\ndef sk_live_SECRET():\n    return helper()\n"
    land(env, {"app.py": secret})
    redact(env, files_of(env, env.trunk)["app.py"]["blob"])
    agent = env.agent("writer")["token"]
    trunk = env.trunk
    rewrite = [{"path": "app.py", "content_b64": base64.b64encode(b"def charge(amount):\n    return amount\n").decode(),
                "mode": None}]
    preview = env.client.call("facts.preview", {"base": trunk, "files": rewrite}, token=agent)
    facts = preview["facts"]
    assert facts["edits"] == ["app.py#<file>"] and facts["deletes"] == [] and facts["adds"] == []
    assert (facts["lines_added"], facts["lines_removed"]) == (0, 0)
    assert [(d["symbol"], d["code"]) for d in preview["leases"]] == [("app.py#<file>", "free")]
    # a change elsewhere whose deleted name the redacted file mentions: it is not `affected`
    util = [{"path": "lib/util.py", "content_b64": None, "mode": None}]
    assert env.client.call("facts.preview", {"base": trunk, "files": util}, token=agent)["facts"]["affected"] == []
    # a lease's warnings are the same for a name the file defines and one it does not
    for name in ("sk_live_SECRET", "no_such_name"):
        got = acquire(env.client, agent, f"app.py#{name}")
        assert got["decision"]["outcome"] == "allow" and got["warnings"] == [], got
        env.client.call("lease.release", {"set": got["set"]}, token=agent)
    acquire(env.client, agent, "app.py#<file>")
    res = env.client.call("change.propose", {"change": None, "base": trunk, "files": rewrite,
                                             "claim": claim_from_facts(facts, "charge is the amount")}, token=agent)
    assert res["decision"]["outcome"] == "allow" and res["facts"]["edits"] == ["app.py#<file>"]
    wait_for(env, res["change"], "integrated")
    # a human's change that deletes the file: prepared and submitted facts name no symbol in it
    env.submit({"op": "redact", "blob": files_of(env, env.trunk)["app.py"]["blob"], "reason": "still"})
    human = prepare(env, {"app.py": None})
    assert human["facts"]["deletes"] == ["app.py#<file>"] and human["facts"]["lines_removed"] == 0
    assert env.submit(human["op"])["decision"]["outcome"] == "allow"
    entries = [e["entry"] for e in env.log() if e["entry"]["op"]["op"] == "change.propose"]
    assert "sk_live_SECRET" not in json.dumps(entries[1:])   # the first was logged before the redaction


def test_a_conflict_with_a_redacted_trunk_side_is_logged_by_its_file(repo_env):
    """The merge queue names a conflict's symbols from both sides: where trunk's side is a
    redacted blob, the conflict is logged as its whole file (path#<file>), in the change's status,
    the integrate entry and the agent's event."""
    env = repo_env
    base = env.trunk
    land(env, {"app.py": "def charge(amount):\n    return amount * 4  # SECRET\n\n\nclass Client:\n"
                                 "    def pay(self):\n        return charge(1)\n"})
    redact(env, files_of(env, env.trunk)["app.py"]["blob"])
    agent = env.agent("late")["token"]
    acquire(env.client, agent, "app.py#<file>")
    late = propose(env.client, agent, base, {"app.py": "def charge(amount):\n    return amount * 5\n\n\nclass Client:\n"
                                                       "    def pay(self):\n        return charge(1)\n"})
    got = wait_for(env, late["change"], "conflicted")
    assert got["status"]["symbols"] == ["app.py#<file>"] and got["integrate_decision"]["reasons"] == ["conflict:app.py#<file>"]
    told = [e for e in env.client.call("events", {"from": 1}, token=agent)["events"] if e["kind"] == "conflicted"]
    assert [e["conflicts"] for e in told] == [["app.py#<file>"]]
