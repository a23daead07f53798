"""Each C binding the worker calls per proposal or integration, looped: the pymalloc blocks each
call leaves in use after gc.collect (a reference kept from C shows as ~1 a call; the probe's own
is ~0.001). `python -m bench.binding_probe [calls]` (docs/decisions.md, "What the soak's worker
grew by in 20 minutes")."""
import gc
import hashlib
import json
import sqlite3
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Callable

import pygit2
from tree_sitter import Node, Parser, Point, Query, QueryCursor, Range
from tree_sitter_language_pack import get_language

from lonca.queue.object_writer import write_object
from lonca.symbols.parsing import edited, parse_bounded

SRC = b"def f(x):\n    return x\n\n" * 20


def probe(name: str, fn: Callable[[], object], n: int) -> None:
    for _ in range(200):
        fn()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(n):
        fn()
    gc.collect()
    print(f"{name:40s} {(sys.getallocatedblocks() - before) / n:+.3f} blocks a call", flush=True)


def pygit2_calls(repo: pygit2.Repository, n: int) -> None:
    sig = pygit2.Signature("a", "a@b", 1, 0)

    def tree_of(files: dict[str, bytes]) -> pygit2.Tree:
        sub = repo.TreeBuilder()
        for name, data in files.items():
            sub.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
        top = repo.TreeBuilder()
        top.insert("src", sub.write(), pygit2.GIT_FILEMODE_TREE)
        return repo[top.write()]

    base = tree_of({"a.py": SRC, "b.py": b"b\n"})
    ours = tree_of({"a.py": SRC.replace(b"return x", b"return 1", 1), "b.py": b"b\n", "c.py": b"c\n"})
    theirs = tree_of({"a.py": SRC.replace(b"return x", b"return 2", 1), "b.py": b"bb\n"})
    c0 = repo.create_commit("refs/heads/main", sig, sig, "m", base.id, [])
    c1 = repo.create_commit(None, sig, sig, "m", ours.id, [c0])
    blob = ours["src"]["a.py"].id

    def merge() -> pygit2.Oid:
        index = repo.merge_trees(base, ours, theirs)
        for _anc, mine, _theirs in list(index.conflicts or ()):
            entry = pygit2.IndexEntry(mine.path, mine.id, mine.mode)
            del index.conflicts[mine.path]
            index.add(entry)
        return index.write_tree(repo)

    probe("Oid(hex)", lambda: pygit2.Oid(hex=str(c0)), n)
    probe("oid in repo", lambda: c0 in repo, n)
    probe("repo[oid].data", lambda: repo[blob].data, n)
    probe("repo.get(commit).tree", lambda: repo.get(c1).tree, n)
    probe("tree iteration + attrs", lambda: [(e.name, e.id, e.filemode, e.type_str) for e in repo[ours["src"].id]], n)
    probe("tree / path", lambda: ours / "src" / "a.py", n)
    probe("name in tree", lambda: "nope" in ours, n)
    probe("odb.read_header", lambda: repo.odb.read_header(c0), n)
    probe("odb.read", lambda: repo.odb.read(c0), n)
    probe("Signature", lambda: pygit2.Signature("x", "y@z", 5, 0), n)
    probe("create_commit_string", lambda: repo.create_commit_string(sig, sig, "msg", ours.id, [c0]), n)
    probe("write_object (hashlib, zlib, os)", lambda: write_object(repo, b"blob", b"same content"), n)
    probe("references[ref].target", lambda: str(repo.references["refs/heads/main"].target), n)
    probe("references.create(force)", lambda: repo.references.create("refs/lonca/x", c1, force=True), n)
    probe("descendant_of", lambda: repo.descendant_of(c1, c0), n)
    probe("walk", lambda: [c.id for c in repo.walk(c1)], n)
    probe("merge_trees, conflicts, add, write_tree", merge, n // 4)
    probe("merge_file_from_index",
          lambda: repo.merge_file_from_index(*list(repo.merge_trees(base, ours, theirs).conflicts)[0]), n // 4)
    probe("diff, patches", lambda: [(p.delta.old_file.path, p.delta.new_file.id, p.delta.status)
                                    for p in repo.diff(base, ours)], n // 4)
    probe("diff, deltas", lambda: [(d.old_file.path, d.status) for d in repo.diff(base, ours).deltas], n // 4)
    probe("TreeBuilder.write", lambda: repo.TreeBuilder(ours["src"]).write(), n)
    probe("create_blob", lambda: repo.create_blob(b"x"), n)
    probe("hash", lambda: pygit2.hash(b"abc"), n)


def tree_sitter_calls(n: int) -> None:
    language = get_language("python")
    tree = Parser(language).parse(SRC)
    new = SRC.replace(b"return x", b"return yy", 1)

    def walk() -> None:
        stack: list[Node] = [tree.root_node]
        while stack:
            node = stack.pop()
            _ = (node.type, node.start_byte, node.end_byte, node.start_point, node.end_point,
                 node.is_missing, node.is_error, node.parent, node.child_by_field_name("name"), node.children)
            stack.extend(node.named_children)

    query = Query(language, "(function_definition name: (identifier) @n)")
    probe("node walk", walk, n // 20)
    probe("tree.copy", tree.copy, n)
    probe("root_node.has_error", lambda: tree.root_node.has_error, n)
    probe("parsing.edited", lambda: edited(tree, SRC, new), n // 4)
    probe("parse_bounded, cold", lambda: parse_bounded("python", new), n // 4)
    probe("parse_bounded, incremental", lambda: parse_bounded("python", new, old=edited(tree, SRC, new)), n // 4)
    probe("parse_bounded, ranged",
          lambda: parse_bounded("python", new, ranges=[Range(Point(0, 0), Point(3, 0), 0, 24)]), n // 4)
    probe("QueryCursor.captures", lambda: QueryCursor(query).captures(tree.root_node), n // 4)


def other_calls(folder: Path, n: int) -> None:
    db = sqlite3.connect(str(folder / "t.db"))
    db.execute("create table t(k text primary key, v blob)")
    probe("sqlite3 insert, select", lambda: (db.execute("insert or replace into t values(?, ?)", ("k", b"v" * 100)),
                                             db.execute("select v from t where k = ?", ("k",)).fetchall()), n)
    probe("json loads, dumps", lambda: json.dumps(json.loads('{"a": [1, 2, "x"], "b": {"c": null}}')), n)
    probe("hashlib.sha1", lambda: hashlib.sha1(b"x" * 100).digest(), n)
    probe("zlib", lambda: zlib.decompress(zlib.compress(b"x" * 100)), n)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    folder = Path(tempfile.mkdtemp())
    pygit2_calls(pygit2.init_repository(str(folder / "s.git"), bare=True), n)
    tree_sitter_calls(n)
    other_calls(folder, n)


if __name__ == "__main__":
    main()
