"""Integrity of what a proposal names (issue 11): one path validator at the edge, facts from the
tree actually written, symlinks, a re-proposed pending change, agent names git can take.

The regression tests are the issue's examples; the property tests check the validator against git
itself and drive a real worker with adversarial proposals while another session holds leases."""
import base64
import os
import subprocess
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import git
from helpers import acquire, claim_of, session_op
from lonca.protocol import LoncaError
from lonca.service.paths import check_path, check_symlink_target

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
README = "# Demo\n\n## Install\n\nRun it.\n\n## Usage\n\nCall it.\n"


@pytest.fixture
def source_repo(tmp_path):
    """The repository the worker imports: source files, a Markdown file with sections, and two
    symlinks (one at the root, one pointing up out of a directory)."""
    src = tmp_path / "src-repo"
    (src / "src").mkdir(parents=True)
    (src / "lib").mkdir()
    (src / "docs").mkdir()
    git("init", "-q", "-b", "main", cwd=src)
    (src / "app.py").write_text("def charge(amount):\n    return amount * 2\n")
    (src / "README.md").write_text(README)
    (src / "src" / "calc.py").write_text(CALC)
    (src / "lib" / "util.py").write_text("def helper():\n    return 42\n")
    (src / "notes.txt").write_text("one\ntwo\n")
    os.symlink("app.py", src / "link")
    os.symlink("../README.md", src / "docs" / "readme")
    git("add", ".", cwd=src)
    git("commit", "-qm", "first", cwd=src)
    return src


def fc(path: str, text: str | None, mode: str | None = None) -> dict:
    return {"path": path, "content_b64": None if text is None else base64.b64encode(text.encode()).decode(), "mode": mode}


def preview(c, token, base, files) -> dict:
    return c.call("facts.preview", {"base": base, "files": files}, token=token)


def propose(c, token, base, files, change=None, claim=None) -> dict:
    if claim is None:
        claim = claim_of(preview(c, token, base, files)["facts"])
    return c.call("change.propose", {"change": change, "base": base, "files": files, "claim": claim}, token=token)


def refused(c, token, base, files) -> str:
    """The message of the `invalid` both facts.preview and change.propose answer."""
    messages = []
    for method, params in (("facts.preview", {"base": base, "files": files}),
                           ("change.propose", {"change": None, "base": base, "files": files, "claim": {}})):
        with pytest.raises(LoncaError) as e:
            c.call(method, params, token=token)
        assert e.value.code == "invalid", (method, e.value.message)
        messages.append(e.value.message.removeprefix(f"{method}: "))  # the schema names the method
    assert messages[0] == messages[1]
    return messages[0]


def tree(c, token, commit) -> dict:
    return {f["path"]: (f["mode"], f["blob"]) for f in c.call("tree", {"commit": commit, "with_content": False}, token=token)}


def content(c, token, commit, path) -> str:
    got = c.call("blobs", {"commit": commit, "paths": [path]}, token=token)
    return base64.b64decode(got[0]["content_b64"]).decode()


def settled(c, token, change, timeout=20) -> dict:
    """change.get once the change has left the queue."""
    deadline = time.time() + timeout
    while True:
        got = c.call("change.get", {"change": change}, token=token)
        if got["status"]["status"] != "queued" or time.time() > deadline:
            return got
        time.sleep(0.05)


def lease_what_preview_says(c, token, base, files) -> dict:
    """Acquire the free leases facts.preview names, then propose with the claim of the facts."""
    pv = preview(c, token, base, files)
    if pv["acquire"]:
        assert acquire(c, token, *pv["acquire"])["decision"]["outcome"] == "allow"
    return propose(c, token, base, files, claim=claim_of(pv["facts"]))


# Most of these are about trees, not the store: they run on SQLite only; the NUL example and the
# re-proposal (state replayed from the log) run on PostgreSQL too.
SQLITE = pytest.mark.parametrize("database_url", [None])


# -- the examples ---------------------------------------------------------------------------

def test_nul_in_a_path_while_another_session_holds_the_function(repo_env):
    env, c = repo_env, repo_env.client
    holder, agent = env.agent("holder")["token"], env.agent("agent")["token"]
    assert acquire(c, holder, "src/calc.py#add")["decision"]["outcome"] == "allow"
    base = env.trunk
    message = refused(c, agent, base, [fc("src/calc.py\u0000x", "def add(a, b):\n    return 0\n")])
    assert "'src/calc.py\\x00x'" in message and "U+0000" in message
    for char in "\n\r\x7f\x85\u2028":
        assert f"U+{ord(char):04X}" in refused(c, agent, base, [fc(f"src/calc.py{char}x", "x")])
    assert env.trunk == base and content(c, agent, base, "src/calc.py") == CALC


@SQLITE
def test_path_under_a_file_while_another_session_holds_a_section(repo_env):
    env, c = repo_env, repo_env.client
    holder, agent = env.agent("holder")["token"], env.agent("agent")["token"]
    assert acquire(c, holder, "README.md#Install")["decision"]["outcome"] == "allow"
    base = env.trunk
    assert "'README.md/x' is below 'README.md', a file of the base" in refused(c, agent, base, [fc("README.md/x", "hi\n")])
    # Replacing the file by a directory, said in full, is a deletion of README.md in the facts,
    # which needs README.md#<file>: the holder's section stands in the way.
    files = [fc("README.md", None), fc("README.md/x", "hi\n")]
    facts = preview(c, agent, base, files)["facts"]
    assert facts["deleted_files"] == ["README.md"] and facts["added_files"] == ["README.md/x"]
    res = propose(c, agent, base, files)
    assert res["decision"]["outcome"] == "deny" and "lease_missing:README.md#<file>" in res["decision"]["reasons"]
    assert res["details"][0]["code"] == "lease_held" and res["details"][0]["symbol"] == "README.md#<file>"
    assert env.trunk == base


@SQLITE
def test_file_and_directory_clashes_within_a_change_and_with_the_base(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent()["token"]
    base = env.trunk
    assert "below 'new', which this change writes" in refused(c, agent, base, [fc("new", "a"), fc("new/b", "b")])
    assert "appears twice" in refused(c, agent, base, [fc("new.py", "a"), fc("new.py", "b")])
    assert "'src' is a directory of the base" in refused(c, agent, base, [fc("src", "a file now\n")])
    assert "below 'link'" in refused(c, agent, base, [fc("link/x", "through a symlink\n")])
    # a directory emptied in the same change may become a file
    facts = preview(c, agent, base, [fc("src/calc.py", None), fc("src", "a file now\n")])["facts"]
    assert facts["deleted_files"] == ["src/calc.py"] and facts["added_files"] == ["src"]


@SQLITE
def test_git_directory_in_any_spelling(repo_env):
    env = repo_env
    agent = env.agent()["token"]
    for path in (".GIT/config", ".git/config", ".Git/hooks/pre-commit", "git~1/config", "GIT~1/x", ".git./config",
                 ".git /config", ".git::$INDEX_ALLOCATION/x", "sub/.git/config", ".g\u200cit/config", "\ufeff.git/x",
                 ".gi\u200et/x"):
        assert "git's own directory" in refused(env.client, agent, env.trunk, [fc(path, "[core]\n")]), path


@SQLITE
def test_names_and_lengths(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent()["token"]
    base = env.trunk
    for bad, why in (("/etc/passwd", "absolute"), ("a//b", "empty"), ("a/", "empty"), ("./a", "'.'"), ("a/../b", "'..'"),
                     ("a\\b", "backslash"), ("x" * 256, "255 bytes"), ("a/" * 2048 + "b", "4096 bytes"),
                     ("", "empty")):
        assert why in refused(c, agent, base, [fc(bad, "x")]), bad
    assert "symlink" in refused(c, agent, base, [fc(".gitmodules", "x", "symlink")])
    assert "submodule" in refused(c, agent, base, [fc("vendor", "x", "submodule")])
    # the schema refuses a shape, change_build what a schema can not say (base64 that decodes)
    assert "params.files[0].mode must be one of" in refused(c, agent, base, [fc("x.py", "x", "fifo")])
    assert "params.files[0].content_b64 must be base64" in refused(c, agent, base, [{"path": "x.py", "content_b64": 7}])
    assert "x.py: content_b64 is not base64" in refused(c, agent, base, [{"path": "x.py", "content_b64": "@@"}])
    ok = "é/" + "y" * 255  # multibyte names are fine within the limits
    assert preview(c, agent, base, [fc(ok, "x")])["facts"]["added_files"] == [ok]


@SQLITE
def test_case_twins_refused_unless_the_policy_allows_them(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent()["token"]
    base = env.trunk
    assert "'README.md' only in case" in refused(c, agent, base, [fc("readme.md", "x")])
    assert "'src' only in case" in refused(c, agent, base, [fc("Src/new.py", "x")])
    assert "only in case" in refused(c, agent, base, [fc("New.py", "x"), fc("new.py", "y")])
    assert "only in case" in refused(c, agent, base, [fc("caf\u00e9.md", "x"), fc("cafe\u0301.md", "y")])
    # renaming by case is no twin: the old name goes in the same change
    facts = preview(c, agent, base, [fc("notes.txt", None), fc("NOTES.txt", "one\ntwo\n")])["facts"]
    assert facts["deleted_files"] == ["notes.txt"] and facts["added_files"] == ["NOTES.txt"]
    env.policy("[review]\ncase_twins = true\n")
    assert preview(c, agent, env.trunk, [fc("readme.md", "x")])["facts"]["added_files"] == ["readme.md"]


@SQLITE
def test_symlinks_added_retargeted_deleted_and_replaced(repo_env):
    env, c = repo_env, repo_env.client
    agent_s = env.agent("agent")
    agent = agent_s["token"]
    steps = [
        ([fc("link2", "src/calc.py", "symlink")], "added_files", {"link2": "symlink"}),
        ([fc("link", "lib/util.py", None)], "modified_files", {"link": "symlink"}),           # mode kept: a symlink
        ([fc("docs/readme", None)], "deleted_files", {"docs/readme": None}),
        ([fc("link2", "now a file\n", "regular")], "modified_files", {"link2": "regular"}),  # symlink -> file
        ([fc("app.py", "lib/util.py", "symlink")], "modified_files", {"app.py": "symlink"}),  # file -> symlink
        ([fc("app.py", "def charge(amount):\n    return amount\n", "executable")], "modified_files", {"app.py": "executable"}),
    ]
    for files, kind, modes in steps:
        base = env.trunk
        res = lease_what_preview_says(c, agent, base, files)
        assert res["decision"]["outcome"] == "allow", (files, res["decision"])
        assert res["facts"][kind] == [files[0]["path"]]
        assert settled(c, agent, res["change"])["status"]["status"] == "integrated"
        after = tree(c, agent, env.trunk)
        for path, mode in modes.items():
            assert (after[path][0] if path in after else None) == mode
    assert content(c, agent, env.trunk, "link") == "lib/util.py"
    # a symlink is covered by a lease on path#<file>: the agent still holds it, another can not change it
    other = env.agent("other")["token"]
    res = propose(c, other, env.trunk, [fc("link", "README.md", "symlink")])
    assert res["decision"]["outcome"] == "deny" and res["decision"]["reasons"] == ["lease_missing:link#<file>"]
    assert res["details"][0]["holder_session"] == agent_s["session"]


@SQLITE
def test_symlink_target_that_leaves_the_tree(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent()["token"]
    base = env.trunk
    for path, target in (("l", "/etc/passwd"), ("l", "../x"), ("docs/l", "../../x"), ("docs/l", "a/../../x"),
                         ("l", "C:\\Windows"), ("l", ".git/config"), ("l", ""), ("l", "a\x00b")):
        message = refused(c, agent, base, [fc(path, target, "symlink")])
        assert repr(path) in message and "symlink" in message, (path, target, message)
    # a symlink the base has keeps its mode when the change leaves mode null: its target is checked too
    assert "leaves the repository" in refused(c, agent, base, [fc("docs/readme", "../../etc/passwd")])
    facts = preview(c, agent, base, [fc("docs/l", "../src/./calc.py", "symlink")])["facts"]
    assert facts["added_files"] == ["docs/l"]


def test_repropose_of_a_pending_change_keeps_the_new_version(repo_env):
    env, c = repo_env, repo_env.client
    agent = env.agent()["token"]
    files = [fc("lonca.toml", "[leases]\nshared = true\n")]  # a critical path: waits for a human
    first = lease_what_preview_says(c, agent, env.trunk, files)
    assert first["status"] == "pending"
    seq1 = env.status()["pending"][0]["seq"]
    second = propose(c, agent, env.trunk, [fc("lonca.toml", "[leases]\nshared = false\n")], change=first["change"])
    assert second["change"] == first["change"] and second["status"] == "pending"
    assert not any(r.startswith("replaces:") for r in second["decision"]["reasons"])
    got = c.call("change.get", {"change": first["change"]}, token=agent)
    pending = env.status()["pending"]
    assert [p["change"] for p in pending] == [first["change"]] and pending[0]["seq"] != seq1
    assert got["version"] == 2 and got["versions"] == [seq1, pending[0]["seq"]]
    assert got["status"] == {"status": "pending", "seq": pending[0]["seq"]}
    env.w.stop()  # the state replayed from the log says the same
    env.w.start()
    env.client = c = env.w.client().connect()
    assert c.call("change.get", {"change": first["change"]}, token=agent) == got
    assert env.submit({"op": "approve", "target_seq": seq1, "note": None})["decision"]["reasons"] == ["not_pending"]
    assert env.submit({"op": "approve", "target_seq": pending[0]["seq"], "note": "ok"})["decision"]["outcome"] == "allow"
    assert settled(c, agent, first["change"])["status"]["status"] == "integrated"
    assert content(c, agent, env.trunk, "lonca.toml") == "[leases]\nshared = false\n"


@SQLITE
def test_agent_names_git_refuses_are_refused_where_they_enter(repo_env):
    env, c = repo_env, repo_env.client
    parent = env.agent("parent")["token"]
    for name in ("evil <x@example.com>", "a>b", "two\nlines", "nul\x00", "tab\tbed", "\u2028", '"', " . ", "", "n" * 129):
        op = session_op(agent=name)
        with pytest.raises(LoncaError) as e:
            env.submit(op)
        assert e.value.code == "invalid" and "op.agent" in e.value.message, name
        with pytest.raises(LoncaError) as e:
            env.client.call("cap.attenuate", {"agent": name, "scope": op["scope"], "expires_ms": op["expires_ms"] - 1000},
                            token=parent)
        assert e.value.code == "invalid", name
    # a name git takes, punctuation and all, is the author of an integrated change
    agent = env.agent("Claude Code (opus) · é")["token"]
    res = lease_what_preview_says(c, agent, env.trunk, [fc("lib/util.py", "def helper():\n    return 43\n")])
    assert settled(c, agent, res["change"])["status"]["status"] == "integrated"


# -- the validator against git itself ---------------------------------------------------------------

NAME_PIECES = [".git", ".GIT", ".Git", "git~1", "GIT~1", "git~2", ".", "..", " ", ":", "$DATA", "\u200c", "\u200e",
               "\ufeff", "\u202e", "\\", "a", "é", "~", "gitmodules", ".gitmodules", "/"]


@pytest.fixture(scope="module")
def git_oracle(tmp_path_factory):
    """A repository whose git refuses every name any checkout would take for .git."""
    repo = tmp_path_factory.mktemp("oracle")
    git("init", "-q", cwd=repo)
    git("config", "core.protectNTFS", "true", cwd=repo)
    git("config", "core.protectHFS", "true", cwd=repo)
    blob = git("hash-object", "-w", "--stdin", cwd=repo)  # the empty blob
    return repo, blob


def git_refuses(oracle, path: str, mode: str) -> bool:
    repo, blob = oracle
    index = repo / ".git" / "oracle-index"
    index.unlink(missing_ok=True)  # each name is tried alone, in an empty index
    res = subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}"], cwd=repo,
                         env={**os.environ, "GIT_INDEX_FILE": str(index)}, capture_output=True)
    return res.returncode != 0


def we_refuse(path: str, symlink: bool) -> bool:
    try:
        check_path(path, symlink=symlink)
        return False
    except LoncaError as e:
        assert e.code == "invalid" and repr(path) in e.message
        return True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(NAME_PIECES), min_size=1, max_size=6).map("".join), st.booleans())
def test_every_name_git_refuses_is_refused(git_oracle, path, symlink):
    if "\x00" in path:
        return
    if git_refuses(git_oracle, path, "120000" if symlink else "100644"):
        assert we_refuse(path, symlink), path


@pytest.mark.parametrize("path", [".git", ".GIT/x", "a/.Git/b", "git~1", "a/GIT~1/b", ".git.", ".git .", ".git:x",
                                  ".g\u200cit", "\u200e.git/x", ".git\ufeff/x", "a/..", "a//b", "./a"])
def test_git_refuses_these_and_so_do_we(git_oracle, path):
    assert git_refuses(git_oracle, path, "100644") and we_refuse(path, False)


def test_lone_surrogates_and_symlink_targets():
    with pytest.raises(LoncaError, match="surrogate"):  # the edge's JSON parser refuses it first
        check_path("\udc80.py")
    check_symlink_target("a/b/l", b"../../x")
    check_symlink_target("a/l", b"./../b/./c/")
    for path, target in (("a/b/l", b"../../../x"), ("l", b"x/../y"), ("l", b"\xff"), ("l", b"/x")):
        with pytest.raises(LoncaError) as e:
            check_symlink_target(path, target)
        assert e.value.code == "invalid" and repr(path) in e.value.message


# -- adversarial proposals against a real worker ------------------------------------------------------

# Paths: those of the repository (and through its files and symlinks), new names in its
# directories, and lists of names among which git's and the validator's refusals hide.
PATHS = ["app.py", "README.md", "src/calc.py", "lib/util.py", "notes.txt", "link", "docs/readme", "README.md/x", "src",
         "link/x", "src/calc.py/y", "Src/calc.py", "lib/Util.py"]
NEW = st.tuples(st.sampled_from(["", "src/", "lib/", "docs/", "deep/er/still/"]),
                st.sampled_from(["new.py", "new.md", "New.py", "caf\u00e9", "cafe\u0301", ".gitmodules", "x" * 255]))
NAMES = ["app.py", "App.py", "README.md", "readme.md", "src", "SRC", "calc.py", "Calc.py", "lib", "util.py", "link",
         "LINK", "docs", "readme", "new.py", "notes.txt", "d", ".git", ".GIT", "git~1", ".git.", ".g\u200cit", "a\x00b",
         "b\nc", "t\tx", "..", ".", "", "x" * 256]
PATH = st.one_of(st.sampled_from(PATHS), NEW.map("".join),
                 st.lists(st.sampled_from(NAMES), min_size=1, max_size=5).map("/".join))
CONTENTS = [None, "def add(a, b):\n    return a + b + 1\n", CALC + "\n\ndef mul(a, b):\n    return a * b\n",
            "# Demo\n\n## Install\n\nRun it now.\n\n## Usage\n\nCall it.\n", README + "\n## More\n\nText.\n", "hello\n",
            "app.py", "../README.md", "/etc/passwd", "../../../x", "src/calc.py", "lib/../app.py", "\x00bin",
            "def charge(amount):\n    return amount * 5\n"]
MODES = [None] * 6 + ["regular", "executable", "symlink", "symlink", "submodule"]
HELD = ["src/calc.py#add", "README.md#Install", "link#<file>", "docs/readme#<file>"]


def overlaps(a: str, b: str) -> bool:
    """One symbol covers the other (the same path; the file, the same name or a member)."""
    (pa, qa), (pb, qb) = a.split("#", 1), b.split("#", 1)
    return pa == pb and ("<file>" in (qa, qb) or qa == qb or qa.startswith(qb + ".") or qb.startswith(qa + "."))


def covered(symbol: str, added: bool, items: list[dict]) -> bool:
    """Whether the agent's lease items cover a change of `symbol`: an edit (or rename) of the
    file, the symbol or what holds it; for an added symbol also an insert into its container
    whose names, if it has any, include it."""
    path, qual = symbol.split("#", 1)
    container, _, name = qual.rpartition(".")
    for it in items:
        ipath, iqual = it["symbol"].split("#", 1)
        if ipath != path:
            continue
        if it["kind"] == "insert":
            if added and iqual == (container or "<file>") and name in it.get("names", [name]):
                return True
        elif iqual in ("<file>", qual) or qual.startswith(iqual + "."):
            return True
    return False


def changed_symbols(facts: dict, path: str) -> list[str]:
    syms = facts["edits"] + facts["adds"] + facts["deletes"]
    return [s for s in syms if s.split("#", 1)[0] == path]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@SQLITE
@given(proposal=st.lists(st.tuples(PATH, st.sampled_from(CONTENTS), st.sampled_from(MODES)), min_size=1, max_size=3,
                         unique_by=lambda f: f[0]))
def test_what_lands_on_trunk_is_what_was_leased_and_claimed(adversarial, proposal):
    env, c, holder, agent = adversarial
    files = [fc(p, t, m) for p, t, m in proposal]
    base = env.trunk
    before = tree(c, agent, base)
    try:
        pv = preview(c, agent, base, files)
    except LoncaError as e:
        event("invalid")
        assert e.code == "invalid", e.message
        with pytest.raises(LoncaError) as again:
            c.call("change.propose", {"change": None, "base": base, "files": files, "claim": {}}, token=agent)
        assert again.value.code == "invalid"
        return
    granted = acquire(c, agent, *pv["acquire"]) if pv["acquire"] else None
    items = pv["acquire"] if granted and granted["decision"]["outcome"] == "allow" else []
    try:
        res = propose(c, agent, base, files, claim=claim_of(pv["facts"]))
        facts, outcome = res["facts"], res["decision"]["outcome"]
        assert facts == pv["facts"]
        if outcome == "escalate":
            seq = next(p["seq"] for p in env.status()["pending"] if p["change"] == res["change"])
            assert env.submit({"op": "approve", "target_seq": seq, "note": None})["decision"]["outcome"] == "allow"
        status = settled(c, agent, res["change"])["status"]["status"] if outcome != "deny" else "denied"
        event(f"{outcome} {status}")
        after = tree(c, agent, env.trunk)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        if status != "integrated":
            assert not changed, (status, changed)
            return
        touched = set(facts["added_files"]) | set(facts["modified_files"]) | set(facts["deleted_files"])
        assert changed == touched, (changed, touched)
        for path in changed:
            if path in before and path in after and before[path][0] == after[path][0] in ("regular", "executable") \
                    and changed_symbols(facts, path):
                needs = changed_symbols(facts, path)   # an edit of a parsed file: each symbol it changed
            else:
                needs = [f"{path}#<file>"]            # added, deleted, a new mode or type, an unparsed file
            for sym in needs:
                assert covered(sym, sym in facts["adds"], items), (sym, items, facts)
                assert not any(overlaps(sym, h) for h in HELD), (sym, facts)
    finally:
        if granted and granted["set"]:
            c.call("lease.release", {"set": granted["set"]}, token=agent)


@pytest.fixture
def adversarial(repo_env):
    """One worker for the whole property test: a holder with leases on a function, a section and
    two symlinks; the agent proposes; unparsed files need leases; docs/ waits for a human."""
    env, c = repo_env, repo_env.client
    env.policy('[leases]\nunparsed_files = "strict"\n[review]\ncritical_paths = ["lonca.toml", "docs/"]\n')
    holder, agent = env.agent("holder")["token"], env.agent("agent")["token"]
    assert acquire(c, holder, *HELD, ttl_ms=3_600_000)["decision"]["outcome"] == "allow"
    return env, c, holder, agent
