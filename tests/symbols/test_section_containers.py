"""Containment and insert containers where section names hold dots (service/lease_model.py,
symbols/facts.py): the table's nesting decides, the id's text only where nothing is known."""
from lonca.service.lease_model import covers, items_conflict
from lonca.symbols import SymbolCache, compute_facts
from lonca.symbols.table import symbol_table

from symtrees import Blobs

BASE = b"# Release 1\n\nA.\n\n# Release 1.1\n\nB.\n\n## Notes\n\nC.\n\n# v1\n\nD.\n"


def edit(sym: str) -> dict:
    return {"symbol": sym, "kind": "edit"}


def facts_of(base: dict[str, bytes], new: dict[str, bytes]):
    blobs = Blobs()
    return compute_facts(blobs.tree(base), blobs.tree(new), blobs.load, SymbolCache())


def test_facts_carry_containers_and_section_nesting():
    f = facts_of({"R.md": BASE, "a.py": b"class K:\n    pass\n"},
                 {"R.md": BASE + b"\n# v1.3\n\nE.\n\n## Fix.1\n\nF.\n",
                  "a.py": b"class K:\n    def m(self):\n        pass\n"})
    assert f.containers["R.md#v1.3"] == ("R.md#<file>", "v1.3")
    assert f.containers["R.md#v1.3.Fix.1"] == ("R.md#v1.3", "Fix.1")
    assert f.containers["a.py#K.m"] == ("a.py#K", "m")
    assert f.nesting["R.md#Release 1.1"] == "R.md#<file>" and f.nesting["R.md#Release 1.1.Notes"] == "R.md#Release 1.1"
    assert not any(k.startswith("a.py#") for k in f.nesting)     # code names hold no dots: nothing to look up


def test_covers_follows_the_nesting_where_a_dot_is_ambiguous():
    nesting = {"R.md#Release 1": "R.md#<file>", "R.md#Release 1.1": "R.md#<file>",
               "R.md#Release 1.1.Notes": "R.md#Release 1.1"}
    assert covers("R.md#Release 1", "R.md#Release 1.1")                 # the text alone says so
    assert not covers("R.md#Release 1", "R.md#Release 1.1", nesting)     # the table does not
    assert covers("R.md#Release 1.1", "R.md#Release 1.1.Notes", nesting)
    assert covers("R.md#<file>", "R.md#Release 1.1.Notes", nesting)
    assert covers("R.md#Release 1", "R.md#Release 1.9", nesting)         # unknown: the text, covering more
    assert covers("a.py#K", "a.py#K.m", nesting) and not covers("a.py#K", "a.py#Kx.m", nesting)
    assert not items_conflict(edit("R.md#Release 1"), edit("R.md#Release 1.1"), nesting)
    assert items_conflict(edit("R.md#Release 1.1"), edit("R.md#Release 1.1.Notes"), nesting)
    ins = {"symbol": "R.md#<file>", "kind": "insert", "names": ["v2"]}
    assert not items_conflict(ins, edit("R.md#Release 1"), nesting)


def test_a_dotted_json_key_beside_a_nested_one():
    table = symbol_table("j.json", b'{"a.b": 1, "a": {"b": 2}}\n')
    nesting = {s.id: s.container for s in table.symbols if s.kind != "file"}
    ids = nesting.keys() & {"j.json#a.b", "j.json#a.b~2"}
    assert len(ids) == 2      # one id each, `~2` for the later (symbol engine 18)
    nested = next(i for i in ids if nesting[i] == "j.json#a")
    flat = next(i for i in ids if nesting[i] == "j.json#<file>")
    assert covers("j.json#a", nested, nesting) and not covers("j.json#a", flat, nesting)
    assert not items_conflict(edit("j.json#a"), edit(flat), nesting)
