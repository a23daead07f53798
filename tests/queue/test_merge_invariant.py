"""Issue 11's merge invariant (merge_invariant.py) over every merge the corpus makes, over merges
made from this project's own git history, and over histories written here from the source of
installed packages. Bounded: a few hundred merges, well under a minute."""
from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pygit2
import pytest

from lonca.queue import merge_trees
from lonca.symbols import symbol_table

from merge_invariant import violations
from queue_corpus import SCENARIOS
from queue_git import write_tree

MAX_BYTES = 24_000


def _merge(repo: pygit2.Repository, path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None):
    """(clean, merged text or None) of one file merged alone, with a file beside it each side leaves."""
    other = {"beside.txt": b"stays\n"}
    trees = [write_tree(repo, {**other, **({path: x} if x is not None else {})}) for x in (base, ours, theirs)]
    result = merge_trees(repo, *trees)
    if result.tree is None:
        return False, None
    tree = repo[result.tree]
    return True, (tree[path].data if path in tree else None)


def _check(repo, path, base, ours, theirs) -> str:
    """"clean", "conflict" or "unread"; fails the test on a violation."""
    clean, merged = _merge(repo, path, base, ours, theirs)
    if not clean:
        return "conflict"
    found = violations(path, base, ours, theirs, merged)
    if found is None:
        return "unread"
    assert not found, (path, found, base, ours, theirs)
    return "clean"


@pytest.fixture
def repo(tmp_path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "r.git"), bare=True)


def test_invariant_over_the_corpus(repo):
    seen = {_check(repo, s.path, s.base, s.ours, s.theirs) for s in SCENARIOS}
    assert {"clean", "conflict"} <= seen


# -- this project's own history ------------------------------------------------------------------

def _versions_in_history(max_commits: int = 400) -> dict[str, list[bytes]]:
    """Each source file's successive contents, oldest first, along the checkout's first-parent
    history: trunk's own states, a merged branch being one step. (Every commit in topological
    order interleaves branches, so three "successive" versions could come from two branches:
    a section one branch added would look deleted by the next.)"""
    found = pygit2.discover_repository(str(Path(__file__).resolve().parent))
    if found is None:
        pytest.skip("not a git checkout: no history to merge")
    git = pygit2.Repository(found)
    commits: list[pygit2.Commit] = []
    at: pygit2.Commit | None = git[git.head.target]
    while at is not None and len(commits) < max_commits:
        commits.append(at)
        at = at.parents[0] if at.parents else None
    versions: dict[str, list[bytes]] = {}
    for c in reversed(commits):
        if not c.parents:
            continue
        for d in git.diff(c.parents[0], c).deltas:
            path = d.new_file.path
            if d.status != pygit2.enums.DeltaStatus.MODIFIED or not path.endswith((".py", ".md")):
                continue
            old, new = git[d.old_file.id].data, git[d.new_file.id].data
            if max(len(old), len(new)) > MAX_BYTES:
                continue
            seq = versions.setdefault(path, [old])
            if seq[-1] != old:
                seq.append(old)
            seq.append(new)
    return versions


def test_invariant_over_this_projects_history(repo):
    """Three successive versions of a file make a merge of two real edits that meet: trunk took
    the next commit, the change went back to the one before."""
    versions = _versions_in_history()
    triples = [(path, vs[i], vs[i + 1], vs[i - 1]) for path, vs in sorted(versions.items())
               for i in range(1, len(vs) - 1)]
    if len(triples) < 10:
        pytest.skip(f"the history holds {len(triples)} merges: fetch the whole history to run this")
    picked = random.Random(11).sample(triples, min(len(triples), 120))
    outcomes = [_check(repo, *t) for t in picked]
    assert outcomes.count("clean") >= 10 and outcomes.count("conflict") >= 1, outcomes


# -- histories written from installed packages ---------------------------------------------------

PACKAGES = ("_pytest", "httpx", "sqlmodel", "pygit2", "hypothesis")


def _sources() -> list[Path]:
    out = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, f"{name} is installed for the tests"
        for folder in spec.submodule_search_locations:
            out += [p for p in sorted(Path(folder).rglob("*.py")) if 1_500 <= p.stat().st_size <= MAX_BYTES]
    return out


def _tops(path: str, data: bytes):
    """Functions and classes at the file's top level, not indented (one under `if` is top-level
    by name but moves with its block)."""
    table = symbol_table(path, data)
    if table.status != "parsed":
        return []
    return [s for s in table.symbols if s.parent is None and s.kind in ("function", "class")
            and data[s.start_byte - 1:s.start_byte] in (b"", b"\n")]


def _edit(rnd: random.Random, path: str, data: bytes, tag: str) -> bytes:
    """One edit an agent makes to a top-level symbol of a real file: a changed line, a new
    function (sometimes a name the other side also picks, or one the file has), a rename, a
    deletion, a move to the end."""
    tops = _tops(path, data)
    lines = data.splitlines(keepends=True)
    if not tops:
        return data
    s = rnd.choice(tops)
    lo, hi = s.start_line - 1, s.end_line
    op = rnd.choice(["line", "line", "add", "rename", "delete", "move"])
    if op == "line":
        i = rnd.randrange(lo, hi)
        lines[i] = lines[i].rstrip(b"\r\n") + f"  # {tag}\n".encode()
    elif op == "add":
        name = rnd.choice(["lonca_added", f"lonca_{tag}", rnd.choice(tops).name])
        lines[hi:hi] = [f"\n\ndef {name}():\n    return {tag!r}\n".encode()]
    elif op == "rename" and s.kind == "function":
        lines[s.def_line - 1] = lines[s.def_line - 1].replace(f"def {s.name}(".encode(), f"def {s.name}_{tag}(".encode(), 1)
    elif op == "delete":
        del lines[lo:hi]
    elif op == "move":
        moved = lines[lo:hi]
        del lines[lo:hi]
        lines += [b"\n\n"] + moved
    return b"".join(lines)


def _side(rnd: random.Random, path: str, data: bytes, tag: str) -> bytes:
    for _ in range(rnd.randint(1, 3)):
        data = _edit(rnd, path, data, tag)
    return data


def test_invariant_over_histories_written_from_installed_packages(repo):
    sources = _sources()
    assert len(sources) > 50
    rnd = random.Random(2026)
    outcomes = []
    for n in range(250):
        src = rnd.choice(sources)
        path = f"pkg/{src.name}"
        base = src.read_bytes()
        if symbol_table(path, base).status != "parsed":
            continue
        ours = _side(rnd, path, base, "trunk")
        # a third of the time the change edits the same symbol as trunk, from the same choices
        theirs = _side(random.Random(n) if n % 3 == 0 else rnd, path, base, "change")
        outcomes.append(_check(repo, path, base, ours, theirs))
    assert outcomes.count("clean") >= 100 and outcomes.count("conflict") >= 20, outcomes
