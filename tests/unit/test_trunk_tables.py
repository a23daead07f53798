"""service/trunk_tables.py: an acquire's trunk tables come from memory when trunk's tree map and
those tables are held, else from one worker thread; both give the same tables, and a path that is
no file at trunk (missing, a folder, a submodule) is None either way. A real git store, a real
symbol cache."""
import pygit2

from conftest import git, git_repo
from lonca.symbols import SymbolCache
from lonca.service.change_build import TreeMaps
from lonca.service.trunk_tables import _held, _read_on_thread, defined_names, nesting, warnings

PATHS = ["app.py", "README.md", "lib", "lib/util.py", "missing.py", "vendor"]

NONE: frozenset[str] = frozenset()  # no blob redacted


def test_tables_from_memory_are_the_threads(tmp_path):
    src = git_repo(tmp_path / "src", {"app.py": "class K:\n    def pay(self):\n        return 1\n",
                                      "README.md": "# R\n\n## Release 1\n\n### Release 1.1\n\nx\n"})
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("def helper():\n    return 42\n")
    git("add", ".", cwd=src)
    git("update-index", "--add", "--cacheinfo", f"160000,{git('rev-parse', 'HEAD', cwd=src)},vendor", cwd=src)
    git("commit", "-qm", "second", cwd=src)
    store = pygit2.Repository(str(src))
    trunk = str(store.head.target)
    maps, symbols = TreeMaps(), SymbolCache()

    assert _held(maps, symbols, trunk, PATHS, NONE) is None       # nothing held yet: the thread reads
    read = _read_on_thread(store, maps, symbols, trunk, PATHS, NONE)
    assert [p for p in PATHS if read[p] is None] == ["lib", "missing.py", "vendor"]
    assert read["app.py"].status == read["README.md"].status == "parsed"
    assert _held(maps, symbols, trunk, PATHS, NONE) == read        # now from memory, the same tables
    assert _held(maps, symbols, trunk, ["app.py", "other.py"], NONE) == {"app.py": read["app.py"], "other.py": None}

    items = [{"symbol": "app.py#K", "kind": "insert", "names": ["refund"]},
             {"symbol": "README.md#R.Release 1", "kind": "edit"},
             {"symbol": "app.py#K.charge", "kind": "edit"},
             {"symbol": "missing.py#run", "kind": "edit"}]
    assert ("app.py#K", "pay") in defined_names(read, items)
    assert nesting(read, items)["README.md#R.Release 1.Release 1.1"] == "README.md#R.Release 1"
    assert [w.split(":")[0] for w in warnings(read, items)] == ["app.py#K.charge", "missing.py#run"]
    assert warnings({}, items) == []     # no trunk: nothing to warn about
