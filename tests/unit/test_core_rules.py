"""The pure rules under the worker: lease items (containment and conflict), the lease index, a
session's scope, and the policy read from lonca.toml."""
import pytest

from lonca.service import scope
from lonca.service.lease_model import LeaseIndex, LeaseSet, covers, items_conflict
from lonca.service.policy import DEFAULT, PolicyError, load, parse


def edit(symbol: str) -> dict:
    return {"symbol": symbol, "kind": "edit"}


@pytest.mark.parametrize("a,b,want", [
    ("a.py#<file>", "a.py#K.m", True),
    ("a.py#K", "a.py#K.m", True),
    ("a.py#K", "a.py#K(1)", True),
    ("a.py#K", "a.py#Key", False),  # a prefix of the name is not a container
    ("a.py#K.m", "a.py#K", False),
    ("a.py#K", "b.py#K", False),
])
def test_containment(a, b, want):
    assert covers(a, b) is want


def test_conflicts_between_kinds():
    assert items_conflict(edit("a.py#K"), edit("a.py#K.m"))
    assert not items_conflict({"symbol": "a.py#f", "kind": "shared"}, {"symbol": "a.py#f", "kind": "shared"})
    ins = lambda *names: {"symbol": "a.py#K", "kind": "insert", "names": list(names)}  # noqa: E731
    assert not items_conflict(ins("x"), ins("y")) and items_conflict(ins("x"), ins("x", "z"))
    assert items_conflict(ins("x"), edit("a.py#K"))  # editing the whole container while one adds to it
    assert items_conflict(ins("m"), edit("a.py#K.m")) and not items_conflict(ins("n"), edit("a.py#K.m"))


def test_the_index_holds_a_sets_items_by_path_and_forgets_them():
    idx = LeaseIndex()
    s = LeaseSet(id="L1", session="s1", owner="s1", items=[edit("a.py#f"), edit("b.py#g")], intent="x",
                 acquired_ms=0, expires_ms=10)
    idx.add(s)
    idx.add(s)  # twice is once
    assert idx.on_path("a.py") == {"L1": [(edit("a.py#f"), None)]}
    s.pinned["c1"] = [edit("c.py#h")]
    idx.add(s)
    assert idx.on_path("c.py") == {"L1": [(edit("c.py#h"), "c1")]}
    idx.remove(s)
    assert idx.by_path == {}


def test_scope():
    sc = {"paths": ["src/**"], "symbols": ["src/a.py#K"], "ops": ["edit"]}
    assert scope.path_in(sc, "src/x/y.py") and not scope.path_in(sc, "lib/y.py")
    assert scope.item_reasons(sc, [edit("src/a.py#K.m")]) == []
    assert scope.item_reasons(sc, [{"symbol": "lib/b.py#f", "kind": "insert"}]) == ["scope_op:insert", "scope_path:lib/b.py"]
    assert scope.item_reasons(sc, [edit("src/a.py#J")]) == ["scope_symbol:src/a.py#J"]
    assert scope.narrower({"paths": ["src/x/**"], "symbols": ["src/a.py#K.m"], "ops": ["edit"]}, sc) == []
    assert scope.narrower({"paths": ["**"]}, sc) == ["paths", "symbols", "ops"]


def test_policy_from_lonca_toml():
    p = parse('[leases]\ntimeout_ms = 5000\n[verification]\ntests = ["pytest"]\nchecks = {lint = ["ruff"]}\n'
              '[review]\ncritical_paths = ["lonca.toml", "ci/**"]\n')
    assert p.heartbeat_timeout_ms == 5000 and p.argv("tests") == ["pytest"] and p.check_names == ["lint"]
    assert p.critical("ci/run") and not p.critical("src/a.py")
    assert load(None) is DEFAULT
    assert load("[leases]\nnope = 1\n").readable is False and load("[leases]\nnope = 1\n").check_names is None
    for bad in ("[leases]\nnope = 1\n", "[leases]\nunparsed_files = \"maybe\"\n", "[verification]\nchecks = {build = [\"x\"]}\n", "x = ["):
        with pytest.raises(PolicyError):
            parse(bad)
