"""Issue 11: scope globs that mean what they say, and leases on ids whose names hold dots
(Markdown sections), over a real worker.

Globs: one meaning (service/globs.py) for scopes, critical_paths and checks_by_path.
Section ids: containers and containment come from the symbol table's nesting, never from
splitting an id on `.` (docs/decisions.md, "Lease containment from the table")."""
import pytest

from conftest import git
from helpers import acquire, propose

CHANGELOG = ("# Changelog\n\nIntro.\n\n"
             "# Release 1\n\nFirst.\n\n"
             "# Release 1.1\n\nFixes.\n\n"
             "# Release 1.2\n\nMore fixes.\n\n"
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
