"""Loose objects written through lonca.queue.object_writer: the ids libgit2 gives the same objects,
stores git reads, and every file of a proposal's build and of a merge made by Python's own
`os.open` (each system call with the GIL let go), none by libgit2 holding it."""
import json
import subprocess
import sys
from pathlib import Path

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lonca.queue.object_writer import TreeWriter, write_commit, write_object

MODES = [pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE, pygit2.GIT_FILEMODE_LINK, pygit2.GIT_FILEMODE_TREE]
# names whose order in a tree is git's rule (a folder sorts as if it ended with "/"), not plain
NAMES = st.sampled_from(["a", "a-b", "a.py", "a0", "a_", "b", "ab", "Ä", "z", "é.txt", "a b", "x~1"])


def _store(tmp_path: Path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "store.git"), bare=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.dictionaries(NAMES, st.tuples(st.binary(max_size=40), st.sampled_from(MODES)), max_size=8),
       then=st.dictionaries(NAMES, st.one_of(st.none(), st.tuples(st.binary(max_size=40), st.sampled_from(MODES))),
                            max_size=5))
def test_trees_and_commits_are_libgit2s(tmp_path_factory, first, then):
    repo = _store(tmp_path_factory.mktemp("w"))
    sub = repo.TreeBuilder().write()    # an empty tree: what a folder entry points at

    def oid(data: bytes, mode: int) -> pygit2.Oid:
        return sub if mode == pygit2.GIT_FILEMODE_TREE else repo.create_blob(data)
    builder, writer = repo.TreeBuilder(), TreeWriter(repo)
    for name, (data, mode) in first.items():
        builder.insert(name, oid(data, mode), mode)
        writer.insert(name, oid(data, mode), mode)
    base = builder.write()
    assert writer.write() == base
    # a tree read back and edited, as a proposal's build and a merge edit their base's folders
    builder, writer = repo.TreeBuilder(repo[base]), TreeWriter(repo, repo[base])
    for name, edit in then.items():
        if edit is None:
            if builder.get(name) is not None:
                builder.remove(name)
                writer.remove(name)
            assert writer.get(name) is None
        else:
            builder.insert(name, oid(*edit), edit[1])
            writer.insert(name, oid(*edit), edit[1])
            assert writer.get(name) == (builder.get(name).id, builder.get(name).filemode)
    assert len(writer) == len(builder)
    tree = builder.write()
    assert writer.write() == tree
    who = pygit2.Signature("Ağent Ö", "agent@lonca.invalid", 1_700_000_123, 120)
    commit = repo.create_commit(None, who, who, "edit ü\n\nLonca-Change: x\n", tree, [])
    assert write_commit(repo, who, who, "edit ü\n\nLonca-Change: x\n", tree, []) == commit
    assert write_commit(repo, who, who, "next\n", base, [commit]) == repo.create_commit(None, who, who, "next\n", base, [commit])
    assert write_object(repo, b"blob", b"only here\n") == pygit2.hash(b"only here\n")
    assert repo[pygit2.hash(b"only here\n")].data == b"only here\n"


def test_git_reads_the_store(tmp_path):
    repo = _store(tmp_path)
    writer = TreeWriter(repo)
    writer.insert("m.py", write_object(repo, b"blob", b"def f():\n    return 1\n"), pygit2.GIT_FILEMODE_BLOB)
    folder = TreeWriter(repo)
    folder.insert("sub", writer.write(), pygit2.GIT_FILEMODE_TREE)
    who = pygit2.Signature("bench", "bench@lonca.invalid", 1_700_000_000, 0)
    first = write_commit(repo, who, who, "one\n", folder.write(), [])
    second = write_commit(repo, who, who, "two\n", folder.write(), [first])
    repo.references.create("refs/heads/main", second)
    out = subprocess.run(["git", "-C", str(tmp_path / "store.git"), "fsck", "--full", "--strict", "--no-dangling"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    shown = subprocess.run(["git", "-C", str(tmp_path / "store.git"), "show", "main:sub/m.py"], capture_output=True, text=True)
    assert shown.stdout == "def f():\n    return 1\n"


# In a child process: an audit hook (there for the rest of a process's life) notes every file
# Python creates; libgit2's own writes, made holding the GIL, raise no audit event.
_BUILD_AND_MERGE = r"""
import json, os, sys
import pygit2
from lonca.queue.merge import integrate
from lonca.service.change_build import build_commit, check_files, tree_map

store = sys.argv[1]
repo = pygit2.init_repository(store, bare=True)
sig = pygit2.Signature("t", "t@lonca.invalid", 1_700_000_000, 0)
tb = repo.TreeBuilder()
sub = repo.TreeBuilder()
sub.insert("a.py", repo.create_blob(b"def a():\n    return 1\n"), pygit2.GIT_FILEMODE_BLOB)
sub.insert("b.py", repo.create_blob(b"def b():\n    return 2\n"), pygit2.GIT_FILEMODE_BLOB)
tb.insert("pkg", sub.write(), pygit2.GIT_FILEMODE_TREE)
base = str(repo.create_commit(None, sig, sig, "base\n", tb.write(), []))
created = set()     # a first open in a new fan-out folder fails, and is made again
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(store) and args[2] & os.O_CREAT:
        created.add(args[0])
sys.addaudithook(hook)
files = check_files([{"path": "pkg/a.py", "content_b64": "ZGVmIGEoKToKICAgIHJldHVybiAxMAo=", "mode": None}])
ours, _ = build_commit(repo, base, files, "a\n", "agent", 1_700_000_000_000, tree_map(repo, repo[base].tree))
on_build = len(created)
files = check_files([{"path": "pkg/b.py", "content_b64": "ZGVmIGIoKToKICAgIHJldHVybiAyMAo=", "mode": None}])
theirs, _ = build_commit(repo, base, files, "b\n", "agent", 1_700_000_000_000, tree_map(repo, repo[base].tree))
before_merge = len(created)
merged = integrate(repo, ours, theirs, base, "merge b\n", sig)
print(json.dumps({"build": on_build, "merge": len(created) - before_merge, "merged": merged.commit,
                  "files": sorted(repo[merged.commit].tree["pkg"].peel(pygit2.Tree)[n].name for n in ("a.py", "b.py"))}))
"""


def test_build_and_merge_create_every_object_file_through_python(tmp_path):
    """Python's os calls let the GIL go in each system call; libgit2's writes through pygit2 hold
    it for the whole write, the kernel's making of the file included (a millisecond on ext4
    without a journal after many deletions: docs/decisions.md, "Loose objects written with the
    GIL let go"). A proposal's build writes a blob, two trees and a commit; a merge two trees and
    a commit: each a file Python created."""
    out = subprocess.run([sys.executable, "-c", _BUILD_AND_MERGE, str(tmp_path / "store.git")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["build"] == 4, seen
    assert seen["merge"] == 3, seen
    assert seen["merged"] and seen["files"] == ["a.py", "b.py"]


def test_the_kept_trees_are_bounded_by_their_bytes(tmp_path, monkeypatch):
    """A folder may hold 10,000 files: the trees kept for editing are bounded by their bytes,
    not their count, and a tree that fell out is read again from the store."""
    from lonca.queue import object_writer
    monkeypatch.setattr(object_writer, "_TREES", object_writer._Trees())
    monkeypatch.setattr(object_writer, "_KEPT_BYTES", 200_000)
    repo = _store(tmp_path)
    blob = repo.create_blob(b"x")
    written = []
    for k in range(40):     # 40 trees of 500 entries: ~5 MB of entries against a 0.2 MB bound
        writer = TreeWriter(repo)
        for j in range(500):
            writer.insert(f"f{k}-{j}.py", blob, pygit2.GIT_FILEMODE_BLOB)
        written.append(writer.write())
        kept = object_writer._TREES
        assert kept._bytes == sum(size for _, size in kept._kept.values()) <= 200_000
    assert 1 <= len(object_writer._TREES._kept) < 10
    first = TreeWriter(repo, repo[written[0]])      # fell out: read again
    assert first.get("f0-499.py") == (blob, pygit2.GIT_FILEMODE_BLOB)
    first.remove("f0-0.py")
    builder = repo.TreeBuilder(repo[written[0]])
    builder.remove("f0-0.py")
    assert first.write() == builder.write()
