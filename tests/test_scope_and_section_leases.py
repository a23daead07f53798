"""Issue 11: scope globs that mean what they say, and leases on ids whose names hold dots
(Markdown sections), over a real worker.

Globs: one meaning (service/globs.py) for scopes, critical_paths and checks_by_path.
Section ids: containers and containment come from the symbol table's nesting, never from
splitting an id on `.` (docs/decisions.md, "Lease containment from the table")."""
import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import git
from helpers import acquire, propose
from lonca.symbols.table import symbol_table

CHANGELOG = ("# Changelog\n\nIntro.\n\n"
             "# Release 1\n\nFirst.\n\n"
             "# Release 1.1\n\nFixes.\n\n## Notes\n\nRead me.\n\n"
             "# Release 1.2\n\nMore fixes.\n\n"
             "# Release\n\nUnversioned.\n\n"
             "# Release.2\n\nDotted.\n\n"
             "# v1\n\nOld line.\n")


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def source_repo(tmp_path):
    src = tmp_path / "src-repo"
    (src / "src" / "a").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=src)
    (src / "src" / "top.py").write_text("def top():\n    return 1\n")
    (src / "src" / "a" / "b.py").write_text("def deep():\n    return 2\n")
    (src / "R.md").write_text(CHANGELOG)
    git("add", ".", cwd=src)
    git("commit", "-qm", "first", cwd=src)
    return src


@pytest.fixture
def env(repo_env):
    return repo_env


def scoped(env, paths):
    scope = {"paths": paths, "symbols": None, "ops": [], "max_files": None, "max_lines": None, "scratch": []}
    return env.agent(scope=scope)["token"]


def test_star_scope_does_not_reach_below_its_directory(env):
    a = scoped(env, ["src/*"])
    c = env.client
    assert acquire(c, a, "src/a/b.py#deep")["decision"]["reasons"] == ["scope_path:src/a/b.py"]
    assert acquire(c, a, "src/top.py#top")["decision"]["outcome"] == "allow"
    res = propose(c, a, env.trunk, {"src/a/b.py": "def deep():\n    return 3\n"})
    assert res["decision"]["outcome"] == "deny"
    assert "scope_path:src/a/b.py" in res["decision"]["reasons"]
    res = propose(c, a, env.trunk, {"src/top.py": "def top():\n    return 5\n"})
    assert res["decision"]["outcome"] == "allow", res["decision"]
    deep = scoped(env, ["src/**"])      # the docs' example keeps reaching every depth
    assert acquire(c, deep, "src/a/b.py#deep")["decision"]["outcome"] == "allow"


def test_critical_star_glob_stays_in_its_directory(env):
    env.policy('[review]\ncritical_paths = ["lonca.toml", "src/*"]\n')
    a = env.agent()["token"]
    c = env.client
    acquire(c, a, "src/a/b.py#deep", "src/top.py#top")
    res = propose(c, a, env.trunk, {"src/a/b.py": "def deep():\n    return 4\n"})
    assert res["decision"] == {"outcome": "allow", "reasons": []}
    res = propose(c, a, env.trunk, {"src/top.py": "def top():\n    return 6\n"})
    assert res["decision"]["outcome"] == "escalate" and "critical_path:src/top.py" in res["decision"]["reasons"]


# -- section ids with dots: containment and containers as the table nests them ------------------

def test_release_notes_with_dotted_names_take_different_leases(env):
    """`Release 1` and `Release 1.1` are two top-level sections: a lease on one does not cover
    the other (it did when containment was read from the dot), while `Release 1.1.Notes`, which
    is nested, stays covered by `Release 1.1`."""
    c = env.client
    a, b, n = (env.agent(x)["token"] for x in ("a", "b", "n"))
    got = {s.id for s in symbol_table("R.md", CHANGELOG.encode()).symbols}
    assert {"R.md#Release 1", "R.md#Release 1.1", "R.md#Release 1.1.Notes", "R.md#Release", "R.md#Release.2"} <= got
    assert acquire(c, a, "R.md#Release 1", intent="first notes")["decision"]["outcome"] == "allow"
    rb = acquire(c, b, "R.md#Release 1.1", "R.md#Release.2", intent="fix notes")
    assert rb["decision"] == {"outcome": "allow", "reasons": []}, rb["details"]
    assert acquire(c, a, "R.md#Release", intent="unversioned")["decision"]["outcome"] == "allow"  # not Release.2
    rn = acquire(c, n, "R.md#Release 1.1.Notes", intent="notes")
    assert rn["decision"]["outcome"] == "deny"
    assert rn["decision"]["reasons"][0].startswith("lease_held:R.md#Release 1.1.Notes:")
    base = env.trunk
    pa = propose(c, a, base, {"R.md": CHANGELOG.replace("First.", "First, corrected.")})
    pb = propose(c, b, base, {"R.md": CHANGELOG.replace("Fixes.", "Fixes, corrected.")})
    assert pa["decision"]["outcome"] == "allow", pa["decision"]
    assert pb["decision"]["outcome"] == "allow", pb["decision"]
    assert pa["facts"]["edits"] == ["R.md#Release 1"] and pb["facts"]["edits"] == ["R.md#Release 1.1"]
    # b's lease on Release 1.1 does not answer a change of Release 1.2 (different section)
    pc = propose(c, b, base, {"R.md": CHANGELOG.replace("More fixes.", "Other fixes.")})
    assert pc["decision"]["outcome"] == "deny" and "lease_missing:R.md#Release 1.2" in pc["decision"]["reasons"]


def test_a_new_top_level_dotted_section_inserts_into_the_file(env):
    """Adding `# v1.3` beside `# v1` inserts into `R.md#<file>` (the id read as text named
    `R.md#v1`, a section that holds nothing of it), and the advice names that container."""
    c = env.client
    a, b, h = (env.agent(x)["token"] for x in ("a", "b", "h"))
    new = CHANGELOG + "\n# v1.3\n\nNew line.\n"
    files = [{"path": "R.md", "content_b64": base64.b64encode(new.encode()).decode(), "mode": None}]
    rb = acquire(c, b, "R.md#v1", intent="old line")
    assert rb["decision"]["outcome"] == "allow"
    pre = c.call("facts.preview", {"base": env.trunk, "files": files}, token=a)
    assert pre["facts"]["adds"] == ["R.md#v1.3"]
    assert pre["acquire"] == [{"symbol": "R.md#<file>", "kind": "insert", "names": ["v1.3"]}]
    assert pre["advice"] is None        # b's edit of v1 is not in the way
    c.call("lease.release", {"set": rb["set"]}, token=b)
    rh = acquire(c, h, "R.md#<file>", intent="restructure")
    held = c.call("facts.preview", {"base": env.trunk, "files": files}, token=a)
    assert "R.md#<file> (adding v1.3) is held by h" in held["advice"], held["advice"]
    assert [(x["code"], x["symbol"], x["names"]) for x in held["leases"]] == [("lease_held", "R.md#<file>", ["v1.3"])]
    c.call("lease.release", {"set": rh["set"]}, token=h)
    assert acquire(c, b, "R.md#v1", intent="old line again")["decision"]["outcome"] == "allow"
    assert acquire(c, a, {"symbol": "R.md#<file>", "kind": "insert"}, intent="add v1.3")["decision"]["outcome"] == "allow"
    res = propose(c, a, env.trunk, {"R.md": new})
    assert res["decision"] == {"outcome": "allow", "reasons": []}, res


HEADING_NAMES = st.lists(st.sampled_from(["Release", " ", "1", ".", "2", "v", "~", "<file>", "Notes"]),
                         min_size=1, max_size=5).map("".join).filter(lambda n: n.strip() and not n.startswith(" "))
INSERTS = st.lists(st.tuples(st.integers(0, CHANGELOG.count("\n")), st.integers(1, 3), HEADING_NAMES),
                   min_size=1, max_size=4)


def with_headings(inserts) -> str:
    lines = CHANGELOG.split("\n")
    for at, level, name in sorted(inserts, reverse=True):
        lines[at:at] = ["", f"{'#' * level} {name.strip()}", "", "Text.", ""]
    return "\n".join(lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(INSERTS)
def test_every_insert_container_is_the_enclosing_section(env, inserts):
    """Over generated changelogs with new headings whose names hold dots, `~`, `<file>`: each
    added section needs an insert into the section that encloses it in the new text (or the
    file), which the base holds or the change adds, never a container read off the id's dots."""
    if not hasattr(env, "session"):
        env.session = env.agent("gen")["token"]
        env.base = env.trunk
    new = with_headings(inserts)
    files = [{"path": "R.md", "content_b64": base64.b64encode(new.encode()).decode(), "mode": None}]
    pre = env.client.call("facts.preview", {"base": env.base, "files": files}, token=env.session)
    base_ids = {s.id for s in symbol_table("R.md", CHANGELOG.encode()).symbols}
    sections = [s for s in symbol_table("R.md", new.encode()).symbols if s.kind == "section"]
    by_id = {s.id: s for s in sections}
    adds = set(pre["facts"]["adds"])
    inserts_needed = {(x["symbol"], n) for x in pre["acquire"] if x["kind"] == "insert" for n in x.get("names") or ()}
    for sym in adds:
        if sym.endswith(".<append>"):
            continue
        s = by_id[sym]
        around = [o for o in sections if o.id != sym and o.start_byte <= s.start_byte and s.end_byte <= o.end_byte
                  and (o.start_byte, -o.end_byte) < (s.start_byte, -s.end_byte)]
        innermost = max(around, key=lambda o: (o.start_byte, -o.end_byte)).id if around else "R.md#<file>"
        assert (innermost, s.name) in inserts_needed, (sym, innermost, pre["acquire"])
    for container, _name in inserts_needed:
        assert container in base_ids or container == "R.md#<file>" or container in adds, (container, pre["acquire"])


def test_a_scope_on_one_release_does_not_reach_the_next(env):
    """A scope's symbols cover as the table nests: `R.md#Release 1` is not `Release 1.1`."""
    scope = {"paths": ["R.md"], "symbols": ["R.md#Release 1", "R.md#Release 1.1"], "ops": [],
             "max_files": None, "max_lines": None, "scratch": []}
    narrow = {**scope, "symbols": ["R.md#Release 1"]}
    a = env.agent("a", scope=narrow)["token"]
    wide = env.agent("w", scope=scope)["token"]
    c = env.client
    assert acquire(c, a, "R.md#Release 1.1")["decision"]["reasons"] == ["scope_symbol:R.md#Release 1.1"]
    assert acquire(c, a, "R.md#Release 1")["decision"]["outcome"] == "allow"
    res = propose(c, a, env.trunk, {"R.md": CHANGELOG.replace("Fixes.", "Fixes!")})
    assert "scope_symbol:R.md#Release 1.1" in res["decision"]["reasons"]
    assert acquire(c, wide, "R.md#Release 1.1.Notes")["decision"]["outcome"] == "allow"  # nested: covered
