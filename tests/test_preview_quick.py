"""A small preview judged on the event loop (change_build.quick_base, facts_of's `quick`) answers
byte for byte what the thread's answer is, or declines (NotQuick) and the thread answers: random
changes to a base of Python files that call each other's functions (bodies edited, functions
added, deleted, renamed and re-signed, new files, files past QUICK_BYTES)."""
import json

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lonca.protocol import LoncaError
from lonca.service.change_build import QUICK_BYTES, NotQuick, TreeMaps, facts_of, planned_map, quick_base
from lonca.symbols import SymbolCache, warm_base

SIG = pygit2.Signature("a", "b", 0, 0)
FILES = ["m0.py", "pkg/m1.py", "pkg/m2.py"]
NAMES = ["alpha", "beta", "gamma", "delta"]


CALLS = " + ".join(f"{n}{i}()" for n in NAMES for i in range(len(FILES)))


def _source(funcs: list[tuple[str, str, int]], pad: int = 0) -> bytes:
    """Functions (name, parameters, body) that each call every function of the base: a symbol
    deleted or re-signed is mentioned by all files."""
    out = "".join(f"def {name}({params}):\n    return {CALLS} + {body}\n\n\n" for name, params, body in funcs)
    return (out + "# " + "x" * pad + "\n").encode() if pad else out.encode()


def _funcs(i: int) -> list[tuple[str, str, int]]:
    return [(f"{n}{i}", "x", k) for k, n in enumerate(NAMES)]


def _answer(repo, cache, base, base_map, files, quick):
    """What prepare's work answers for a preview, as the bytes of its JSON; ('refused', ...) or NotQuick."""
    try:
        new_map, blobs = planned_map(repo, base, files, base_map)
        facts = facts_of(repo, cache, base, base_map, new_map, files, blobs, quick=quick)
    except LoncaError as e:
        return ("refused", e.code, e.message)
    return json.dumps([facts.to_json(), facts.syntax_errors, sorted(facts.containers.items()),
                       sorted(facts.nesting.items())], sort_keys=True).encode()


def _warm(repo, base_map, base: str | None = None) -> SymbolCache:
    """A cache holding the base's tables; with `base`, only in the base's name index (warm_base's
    tables, read from another cache), as the worker's warmer leaves them."""
    cache = SymbolCache()
    if base is not None:
        cache.keep_base_index(base, warm_base(base_map, SymbolCache(), lambda oid: repo[oid].data))
        return cache
    for path in FILES:
        cache.table(path, base_map[path].oid, lambda path=path: repo[base_map[path].oid].data)
    return cache


def _base(folder) -> tuple:
    """A bare store in `folder` whose one commit holds FILES: (store, commit, its TreeMaps, its map)."""
    repo = pygit2.init_repository(str(folder / "s.git"), bare=True)
    index = pygit2.Index()
    for i, path in enumerate(FILES):
        index.add(pygit2.IndexEntry(path, repo.create_blob(_source(_funcs(i))), pygit2.GIT_FILEMODE_BLOB))
    base = str(repo.create_commit(None, SIG, SIG, "base", index.write_tree(repo), []))
    maps = TreeMaps()
    return repo, base, maps, maps.get(repo, base)


EDIT = st.tuples(st.sampled_from(["body", "add", "delete", "rename", "resign", "big", "new", "below_file"]),
                 st.integers(0, 2), st.integers(0, 3), st.integers(1, 99))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDIT, min_size=1, max_size=3), by_index=st.booleans())
def test_a_preview_on_the_loop_answers_what_the_thread_does(tmp_path_factory, edits, by_index):
    repo, base, maps, base_map = _base(tmp_path_factory.mktemp("s"))
    changed: dict[str, list] = {}
    files: dict[str, dict] = {}
    for kind, i, k, v in edits:
        path = FILES[i]
        funcs = changed.setdefault(path, _funcs(i))
        k %= len(funcs)
        name, params, _ = funcs[k]
        pad = 0
        if kind == "body":
            funcs[k] = (name, params, v)
        elif kind == "add":
            funcs.append((f"new{v}", "z", v))
        elif kind == "delete":
            funcs[k] = funcs[-1] if len(funcs) > 1 else funcs[k]
            del funcs[-1]
        elif kind == "rename":
            funcs[k] = (f"renamed{v}", params, funcs[k][2])
        elif kind == "resign":
            funcs[k] = (name, "x, y=1", funcs[k][2])
        elif kind == "big":
            pad = QUICK_BYTES
        elif kind == "new":
            files[f"pkg/new{v}.py"] = {"path": f"pkg/new{v}.py", "data": _source([(f"n{v}", "a", v)]), "mode": None}
            continue
        else:   # below a file of the base: refused the same on both sides
            files[f"{path}/x.py"] = {"path": f"{path}/x.py", "data": b"x = 1\n", "mode": None}
            continue
        files[path] = {"path": path, "data": _source(funcs, pad), "mode": None}
    change = list(files.values())
    key = base if by_index else None
    cache = _warm(repo, base_map, key)
    held = quick_base(repo, maps, cache, base, change)
    assert held is not None or any(len(f["data"]) > QUICK_BYTES for f in change)
    thread = _answer(repo, _warm(repo, base_map, key), base, base_map, change, quick=False)
    if held is None:
        return
    try:
        on_loop = _answer(repo, cache, base, held, change, quick=True)
    except NotQuick:
        return      # the thread answers it
    assert on_loop == thread, change


def test_a_body_edit_is_judged_on_the_loop_and_a_deleted_symbol_is_not(tmp_path):
    repo, base, maps, base_map = _base(tmp_path)
    funcs = _funcs(1)
    body = [{"path": FILES[1], "data": _source([funcs[0][:2] + (7,)] + funcs[1:]), "mode": None}]
    gone = [{"path": FILES[1], "data": _source(funcs[1:]), "mode": None}]
    assert quick_base(repo, maps, SymbolCache(), base, body) is None     # the old table not held
    cache = _warm(repo, base_map)
    assert quick_base(repo, maps, cache, base, body) is base_map
    assert _answer(repo, cache, base, base_map, body, quick=True) == _answer(repo, cache, base, base_map, body, False)
    try:
        _answer(repo, cache, base, base_map, gone, quick=True)
    except NotQuick:
        pass
    else:
        raise AssertionError("a deleted symbol's `affected` reads other files: the loop must decline it")


def test_a_preview_on_a_trunk_just_moved_is_judged_on_the_loop(tmp_path):
    """The first previews after a landing find no map of the new trunk (nobody asked for it yet):
    it is made on the loop from its parent's, and the answer is the thread's."""
    repo, base, maps, base_map = _base(tmp_path)
    funcs = _funcs(0)
    landed = _source([funcs[0][:2] + (5,)] + funcs[1:])
    tree = repo[base].tree
    builder = repo.TreeBuilder(tree)
    builder.insert(FILES[0], repo.create_blob(landed), pygit2.GIT_FILEMODE_BLOB)
    trunk = str(repo.create_commit(None, SIG, SIG, "landed", builder.write(), [pygit2.Oid(hex=base)]))
    cache = _warm(repo, base_map)
    body = [{"path": FILES[1], "data": _source([_funcs(1)[0][:2] + (7,)] + _funcs(1)[1:]), "mode": None}]
    held = quick_base(repo, maps, cache, trunk, body)
    assert held is not None and dict(held.items()) == TreeMaps().get(repo, trunk)
    thread = _answer(repo, _warm(repo, base_map), trunk, TreeMaps().get(repo, trunk), body, quick=False)
    assert _answer(repo, cache, trunk, held, body, quick=True) == thread
