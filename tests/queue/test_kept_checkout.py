"""A checkout kept between checks equals a fresh checkout of each candidate tree, over random
sequences of trees (files giving way to folders and back, modes, links, submodules) with random
damage done by the "check" in between (build output, rewrites in the same clock tick, chmod,
folders swapped for links pointing outside, files for folders)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pygit2
from hypothesis import given, settings
from hypothesis import strategies as st
from pygit2.enums import FileMode

from lonca.queue.checkout import KeptCheckout, checkout_tree

PATHS = ["a", "b", "a/q", "d/x", "d/y", "d/e/z", "d/e", "s", "l"]
KINDS = st.sampled_from(["blob", "exec", "link", "commit"])
CONTENT = st.sampled_from([b"one\n", b"two\n", b"BAD\n", b"", b"0123456789" * 30])
LINKS = st.sampled_from(["b", "../outside", "d", "/etc/passwd", "d/x"])


@st.composite
def trees(draw) -> dict[str, tuple[str, bytes]]:
    files: dict[str, tuple[str, bytes]] = {}
    for path in draw(st.lists(st.sampled_from(PATHS), unique=True, max_size=len(PATHS))):
        # a path can not be a file and a folder at once: the first one drawn wins
        if any(p.startswith(path + "/") or path.startswith(p + "/") for p in files):
            continue
        kind = draw(KINDS)
        data = draw(LINKS).encode() if kind == "link" else draw(CONTENT)
        files[path] = (kind, data)
    return files


DAMAGE = st.lists(st.tuples(st.sampled_from(["extra", "rewrite", "chmod", "delete", "dir_to_link", "file_to_dir",
                                             "file_to_link", "beside"]),
                            st.sampled_from(PATHS + ["new", "d/new"])), max_size=4)


def _tree(repo: pygit2.Repository, files: dict[str, tuple[str, bytes]]) -> pygit2.Oid:
    index = pygit2.Index()
    commit = repo.create_commit(None, SIG, SIG, "sub", repo.TreeBuilder().write(), [])
    for path, (kind, data) in files.items():
        if kind == "commit":
            index.add(pygit2.IndexEntry(path, commit, FileMode.COMMIT))
            continue
        mode = {"blob": FileMode.BLOB, "exec": FileMode.BLOB_EXECUTABLE, "link": FileMode.LINK}[kind]
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), mode))
    return index.write_tree(repo)


SIG = pygit2.Signature("Test", "test@lonca.invalid", 1_700_000_000, 0)


def snapshot(root: Path) -> dict[str, tuple]:
    """Everything under root, links not followed: kind, bytes or target, permission bits."""
    out: dict[str, tuple] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            p = Path(folder) / name
            rel = str(p.relative_to(root))
            st_ = os.lstat(p)
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st_.st_mode & 0o777)
            else:
                out[rel] = ("file", p.read_bytes(), st_.st_mode & 0o777)
    return out


def damage(root: Path, outside: Path, acts: list[tuple[str, str]]) -> None:
    """What a check may do to its checkout (and beside it)."""
    for act, path in acts:
        p = root / path
        try:
            if act == "extra":
                p.parent.mkdir(parents=True, exist_ok=True)
                p.with_name(p.name + ".o").write_bytes(b"built\n")
            elif act == "rewrite" and p.is_file() and not p.is_symlink():
                data = p.read_bytes()   # same size, at once: within our write's clock tick
                p.write_bytes(bytes(b ^ 1 for b in data) if data else b"")
            elif act == "chmod" and p.exists() and not p.is_symlink():
                p.chmod(p.stat().st_mode ^ 0o100)
            elif act == "delete" and (p.exists() or p.is_symlink()):
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            elif act == "dir_to_link" and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
                os.symlink(outside, p)
            elif act == "file_to_dir" and (p.is_file() or p.is_symlink()):
                p.unlink()
                p.mkdir()
                (p / "inside").write_bytes(b"x\n")
            elif act == "file_to_link" and p.is_file() and not p.is_symlink():
                p.unlink()
                os.symlink(outside / "victim", p)
            elif act == "beside":
                (root.parent / "artifact").write_bytes(b"left beside the checkout\n")
        except OSError:
            pass


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(trees(), DAMAGE), min_size=1, max_size=6))
def test_a_kept_checkout_equals_a_fresh_one(steps):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = pygit2.init_repository(str(base / "r.git"), bare=True)
        outside = base / "outside"
        outside.mkdir()
        (outside / "victim").write_bytes(b"untouched\n")
        kept = KeptCheckout(base / "slot" / "tree")
        for n, (files, acts) in enumerate(steps):
            tree = _tree(repo, files)
            kept.update(repo, tree)
            fresh = base / f"fresh{n}"
            checkout_tree(repo, tree, fresh)
            assert snapshot(kept.root) == snapshot(fresh)
            assert sorted(p.name for p in kept.root.parent.iterdir()) == ["tree"]
            damage(kept.root, outside, acts)
        # nothing outside the checkout was written through a planted link
        assert snapshot(outside) == {"victim": ("file", b"untouched\n", snapshot(outside)["victim"][2])}


def test_only_what_differs_is_written(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    files = {f"m/f{i}.py": ("blob", f"x = {i}\n".encode()) for i in range(50)}
    kept = KeptCheckout(tmp_path / "slot" / "tree")
    assert kept.update(repo, _tree(repo, files)) == 50
    files["m/f3.py"] = ("blob", b"x = 'three'\n")
    del files["m/f4.py"]
    assert kept.update(repo, _tree(repo, files)) == 1
    (kept.root / "m" / "f7.py").write_bytes(b"changed by a check\n")
    (kept.root / "build.o").write_bytes(b"output\n")
    assert kept.update(repo, _tree(repo, files)) == 1      # f7 again; build.o removed
    assert snapshot(kept.root) == snapshot(_fresh(repo, _tree(repo, files), tmp_path / "fresh"))


def _fresh(repo, tree, dest: Path) -> Path:
    checkout_tree(repo, tree, dest)
    return dest
