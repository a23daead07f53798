"""The one glob meaning (service/globs.py) for scopes, critical_paths and checks_by_path."""
import pytest

from lonca.service import scope
from lonca.service.globs import glob_match, glob_within
from lonca.service.policy import parse

MATCH = [
    # glob, path, matches
    ("src/*", "src/a.py", True),
    ("src/*", "src/a/b.py", False),         # `*` never crosses `/`
    ("src/*", "src/a/b/c", False),
    ("src/*", "src", False),
    ("src/**", "src/a.py", True),
    ("src/**", "src/a/b/c", True),          # `**` crosses directories
    ("src/**", "src", False),               # what is below, not the directory itself
    ("src/**", "srcx/a.py", False),
    ("src/", "src/a/b.py", True),           # a trailing `/` covers what is below
    ("src", "src/a/b.py", True),            # so does a name without wildcards
    ("src", "src", True),
    ("src", "srcx", False),
    ("lonca.toml", "lonca.toml", True),
    ("lonca.toml", "sub/lonca.toml", False),  # anchored at the root
    ("*.py", "a.py", True),
    ("*.py", "src/a.py", False),
    ("**/*.py", "a.py", True),              # `**/` also matches no directory
    ("**/*.py", "src/a/b.py", True),
    ("**/*.py", "src/a/b.pyc", False),
    ("src/**/test_*.py", "src/test_a.py", True),
    ("src/**/test_*.py", "src/x/y/test_a.py", True),
    ("src/**/test_*.py", "src/x/y/a_test.py", False),
    ("src/?.py", "src/a.py", True),
    ("src/?.py", "src/ab.py", False),
    ("src/?", "src//", False),
    ("src/[ab].py", "src/b.py", True),
    ("src/[ab].py", "src/c.py", False),
    ("**", "anything/at/all", True),
    ("ci/**", "ci/run", True),
    ("", "a", False),
]


@pytest.mark.parametrize("glob,path,want", MATCH)
def test_glob_match(glob, path, want):
    assert glob_match(glob, path) is want


WITHIN = [
    # child, parent, within
    ("src/x/**", "src/**", True),
    ("src/*", "src/**", True),
    ("src/a.py", "src/*", False),        # a name without wildcards also covers what is below it
    ("src/a.py", "src/**", True),
    ("src/**", "src/*", False),
    ("**", "src/**", False),
    ("src/*", "src/x*", False),
    ("src/ab*", "src/a*", True),
    ("src/[ab]", "src/**", False),       # conservative: classes are not compared
    ("docs/", "docs", True),
    ("**", "**", True),
]


@pytest.mark.parametrize("child,parent,want", WITHIN)
def test_glob_within(child, parent, want):
    assert glob_within(child, parent) is want


def test_scope_critical_and_checks_read_globs_alike():
    sc = {"paths": ["src/*"]}
    assert scope.path_in(sc, "src/a.py") and not scope.path_in(sc, "src/a/b.py")
    assert scope.item_reasons(sc, [{"symbol": "src/a/b.py#f", "kind": "edit"}]) == ["scope_path:src/a/b.py"]
    p = parse('[review]\ncritical_paths = ["ci/*", "lonca.toml"]\n'
              '[verification]\nchecks = { lint = ["ruff"] }\nchecks_by_path = { "src/*" = ["lint"] }\n')
    assert p.critical("ci/run.sh") and not p.critical("ci/deep/run.sh") and not p.critical("x/lonca.toml")

    class Change:
        checks: list = []
        facts: dict = {}

        def __init__(self, paths):
            self.paths = paths
    assert p.runs(Change(["src/a.py"])) == ["lint"] and p.runs(Change(["src/a/b.py"])) == []


def test_a_child_scope_on_a_dotted_section_is_no_narrowing_without_a_table():
    parent = {"paths": ["**"], "symbols": ["R.md#Release 1", "a.py#K"]}
    assert scope.narrower({"paths": ["**"], "symbols": ["R.md#Release 1.1"]}, parent) == ["symbols"]
    assert scope.narrower({"paths": ["**"], "symbols": ["R.md#Release 1", "a.py#K.m"]}, parent) == []
    assert scope.narrower({"paths": ["**"], "symbols": ["R.md#x"]}, {"paths": ["**"], "symbols": ["R.md#<file>"]}) == []
