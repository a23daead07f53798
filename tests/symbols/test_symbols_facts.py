"""Facts of a change, field by field, and claims against them."""
from __future__ import annotations

from lonca.symbols import SymbolCache, compare_claim, compute_facts
from symtrees import Blobs, facts

CLIENT = b'''import os


class Client:
    rate = 1

    def charge(self, amount):
        total = amount * self.rate
        return total

    def refund(self, amount):
        value = -amount
        log(value)
        return value


def use(c):
    return c.charge(1) + c.refund(2)


def other():
    return 0
'''


def edit(src: bytes, old: bytes, new: bytes) -> bytes:
    assert old in src
    return src.replace(old, new, 1)


def test_same_tree_has_no_facts() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": CLIENT})
    assert not any(v for k, v in f.items() if k != "tests") and not any(f["tests"].values())


def test_body_edit() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"* self.rate", b"* self.rate * 2")})
    assert f["edits"] == ["a.py#Client.charge"]
    assert f["signature_changes"] == [] and f["affected"] == []
    assert (f["lines_added"], f["lines_removed"]) == (1, 1)
    assert f["modified_files"] == ["a.py"]


def test_signature_change_and_affected() -> None:
    f = facts({"a.py": CLIENT, "b.py": b"from a import Client\n\ndef pay(c):\n    c.charge(3)\n"},
              {"a.py": edit(CLIENT, b"charge(self, amount)", b"charge(self, amount, currency)"),
               "b.py": b"from a import Client\n\ndef pay(c):\n    c.charge(3)\n"})
    assert f["edits"] == ["a.py#Client.charge"]
    assert f["signature_changes"] == ["a.py#Client.charge"]
    assert f["affected"] == ["a.py#use", "b.py#pay"]
    assert f["affected_more"] == 0


def test_type_own_text_is_def() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"rate = 1", b"rate = 2")})
    assert f["edits"] == ["a.py#Client.<def>"]


def test_file_text_is_file_symbol_and_import_only() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"import os\n", b"import os\nimport sys\n")})
    assert f["edits"] == ["a.py#<file>"]
    assert f["import_only_files"] == ["a.py"]
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"import os\n", b"import os\nX = 1\n")})
    assert f["edits"] == ["a.py#<file>"] and f["import_only_files"] == []


def test_add_and_delete_members() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"\n\ndef other():\n    return 0\n", b"")
                                 + b"\n\nclass New:\n    def m(self):\n        return 1\n"})
    assert f["deletes"] == ["a.py#other"]
    assert f["adds"] == ["a.py#New", "a.py#New.m"]
    assert f["renames"] == []


def test_rename_is_also_delete_and_add() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(CLIENT, b"def refund(", b"def give_back(")})
    assert f["renames"] == [["a.py#Client.refund", "a.py#Client.give_back"]]
    assert f["deletes"] == ["a.py#Client.refund"]
    assert f["adds"] == ["a.py#Client.give_back"]
    assert f["edits"] == []
    assert f["affected"] == ["a.py#use"]      # it mentions refund


def test_rename_with_new_parameters_is_an_edit_too() -> None:
    f = facts({"a.py": CLIENT},
              {"a.py": edit(CLIENT, b"def refund(self, amount)", b"def give_back(self, amount, why)")})
    assert f["renames"] == [["a.py#Client.refund", "a.py#Client.give_back"]]
    assert f["edits"] == ["a.py#Client.give_back"]


def test_no_rename_without_a_similar_body_or_with_two_candidates() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": edit(
        CLIENT, b"def refund(self, amount):\n        value = -amount\n        log(value)\n"
                b"        return value\n",
        b"def other_thing(self):\n        import json\n        return json.dumps({})\n")})
    assert f["renames"] == [] and f["deletes"] == ["a.py#Client.refund"]
    two = b"def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x + 1\n"
    f = facts({"m.py": b"def z(x):\n    return x + 1\n"}, {"m.py": two})
    assert f["renames"] == []


def test_class_rename_carries_its_members() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": CLIENT.replace(b"class Client", b"class Customer")})
    assert ["a.py#Client", "a.py#Customer"] in f["renames"]
    assert ["a.py#Client.charge", "a.py#Customer.charge"] in f["renames"]


def test_added_and_deleted_files() -> None:
    f = facts({"a.py": CLIENT, "old.rs": b"fn gone() {}\n"},
              {"a.py": CLIENT, "new.go": b"package p\n\nfunc Hello() {}\n"})
    assert f["added_files"] == ["new.go"] and f["deleted_files"] == ["old.rs"]
    assert f["adds"] == ["new.go#<file>", "new.go#Hello"]
    assert f["deletes"] == ["old.rs#<file>", "old.rs#gone"]
    assert (f["lines_added"], f["lines_removed"]) == (3, 1)


def test_unparsed_files_only_for_line_edits() -> None:
    base = {"notes.txt": b"".join(b"line %d\n" % i for i in range(10))}
    small = {"notes.txt": base["notes.txt"].replace(b"line 3", b"line three")}
    f = facts(base, small)
    assert f["unparsed_files"] == ["notes.txt"] and f["edits"] == ["notes.txt#<file>"]
    rewrite = {"notes.txt": b"".join(b"other %d\n" % i for i in range(10))}
    f = facts(base, rewrite)
    assert f["unparsed_files"] == [] and f["edits"] == ["notes.txt#<file>"]
    f = facts(base, small, new_modes={"notes.txt": "100755"})
    assert f["unparsed_files"] == [] and f["edits"] == ["notes.txt#<file>"]
    f = facts(base, {"notes.txt": base["notes.txt"] + b"\0"})
    assert f["unparsed_files"] == []
    f = facts({}, base)
    assert f["unparsed_files"] == [] and f["adds"] == ["notes.txt#<file>"]


def test_unread_files() -> None:
    broken = edit(CLIENT, b"def use(c):", b"def use(c:")
    f = facts({"a.py": CLIENT}, {"a.py": broken})
    assert f["unread_files"] == ["a.py"] and f["edits"] == ["a.py#<file>"]
    f = facts({"a.py": broken}, {"a.py": broken + b"\n# more\n"})
    assert f["unread_files"] == [] and f["edits"] == ["a.py#<file>"]
    f = facts({}, {"b.rs": b"fn f( {"})
    assert f["unread_files"] == ["b.rs"] and f["adds"] == ["b.rs#<file>"]


def test_mode_only_change() -> None:
    f = facts({"run.py": CLIENT}, {"run.py": CLIENT}, new_modes={"run.py": "100755"})
    assert f["modified_files"] == ["run.py"] and f["edits"] == ["run.py#<file>"]


def test_tests_field() -> None:
    base = b"def test_a():\n    assert 1\n\n\ndef test_b():\n    assert 2\n\n\ndef test_c():\n    pass\n"
    new = (b"def test_a():\n    assert 10\n\n\n@pytest.mark.skip\ndef test_b():\n    assert 2\n\n\n"
           b"def test_d():\n    pass\n")
    f = facts({"t.py": base}, {"t.py": new})
    assert f["tests"] == {"added": ["t.py#test_d"], "deleted": ["t.py#test_c"],
                          "modified": ["t.py#test_a", "t.py#test_b"], "skipped": ["t.py#test_b"]}
    rust = facts({"l.rs": b"#[test]\nfn t() {}\n"}, {"l.rs": b"#[test]\n#[ignore]\nfn t() {}\n"})
    assert rust["tests"]["skipped"] == ["l.rs#t"]


def test_markdown_append_and_sections() -> None:
    base = b"# Doc\n\n## Install\n\nrun it\n\n## Use\n\nx\n"
    f = facts({"README.md": base}, {"README.md": base.replace(b"run it\n", b"run it\nthen this\n")})
    assert f["adds"] == ["README.md#Doc.Install.<append>"] and f["edits"] == []
    f = facts({"README.md": base}, {"README.md": base.replace(b"run it", b"walk it")})
    assert f["edits"] == ["README.md#Doc.Install"]
    toml = b"[dependencies]\nserde = \"1\"\ntokio = \"1\"\n"
    f = facts({"Cargo.toml": toml}, {"Cargo.toml": toml.replace(b'serde = "1"', b'serde = "2"')})
    assert f["edits"] == ["Cargo.toml#dependencies.serde"]


def test_go_and_java_and_rust_changes() -> None:
    go = b"package p\n\ntype S struct{}\n\nfunc (s *S) M(x int) int {\n\treturn x\n}\n"
    f = facts({"s.go": go}, {"s.go": go.replace(b"M(x int)", b"M(x, y int)")})
    assert f["signature_changes"] == ["s.go#S.M"]
    java = b"class A {\n  void m(int a) {}\n  void m(String s) {}\n}\n"
    f = facts({"A.java": java}, {"A.java": java.replace(b"(String s) {}", b"(String s) { go(); }")})
    assert f["edits"] == ["A.java#A.m(String)"]
    rs = b"struct S;\nimpl From<u8> for S {\n    fn from(x: u8) -> S { S }\n}\n"
    f = facts({"a.rs": rs}, {"a.rs": rs.replace(b"{ S }", b"{ let _ = x; S }")})
    assert f["edits"] == ["a.rs#S.From.from"]


def test_affected_is_capped() -> None:
    callers = {f"c{i:04d}.py": b"def f%d():\n    return target()\n" % i for i in range(1005)}
    base = {"t.py": b"def target():\n    return 1\n", **callers}
    new = {"t.py": b"def target(x):\n    return 1\n", **callers}
    f = facts(base, new)
    assert len(f["affected"]) == 1000 and f["affected_more"] == 5
    assert f["affected"] == sorted(f["affected"])


def test_cache_reads_each_blob_once() -> None:
    cache, blobs = SymbolCache(), Blobs()
    base = blobs.tree({"a.py": CLIENT, "b.py": b"def pay(c):\n    c.charge(1)\n"})
    new = blobs.tree({"a.py": edit(CLIENT, b"charge(self, amount)", b"charge(self, x)"),
                      "b.py": b"def pay(c):\n    c.charge(1)\n"})
    first = compute_facts(base, new, blobs.load, cache).to_json()
    misses = cache.misses
    assert compute_facts(base, new, blobs.load, cache).to_json() == first
    assert cache.misses == misses == 3
    same_blob_two_names = blobs.tree({"x.py": CLIENT, "y.py": CLIENT, "z.txt": CLIENT})
    tables = [cache.table(p, e.oid, lambda e=e: blobs.load(e.oid))
              for p, e in same_blob_two_names.items()]
    assert tables[1].symbols[0].id.startswith("y.py#")
    assert tables[2].status == "unparsed"
    assert cache.misses == misses + 1       # z.txt: another grammar, another table


def test_json_shape_is_sorted_and_integer() -> None:
    f = facts({"a.py": CLIENT}, {"a.py": CLIENT + b"\n\ndef zz():\n    pass\n\n\ndef aa():\n    pass\n"})
    assert f["adds"] == ["a.py#aa", "a.py#zz"]
    assert set(f) == {"edits", "adds", "deletes", "renames", "signature_changes", "deleted_files",
                      "added_files", "modified_files", "import_only_files", "lines_added",
                      "lines_removed", "tests", "unparsed_files", "unread_files", "affected",
                      "affected_more"}
    assert all(type(f[k]) is int for k in ("lines_added", "lines_removed", "affected_more"))


# --- claims ---------------------------------------------------------------------------------

def _facts_object():
    blobs = Blobs()
    return compute_facts(blobs.tree({"a.py": CLIENT}),
                         blobs.tree({"a.py": edit(CLIENT, b"return 0", b"return 1")}), blobs.load)


def test_claim_that_matches() -> None:
    f = _facts_object()
    assert compare_claim({"intent": "x", "edits": ["a.py#other"]}, f) == []


def test_claim_mismatches_per_field() -> None:
    f = _facts_object()
    got = compare_claim({"edits": ["a.py#use"], "deletes": ["a.py#x"],
                         "tests": {"added": ["a.py#t"]}}, f)
    assert [m["field"] for m in got] == ["edits", "deletes", "tests"]
    assert got[0] == {"field": "edits", "claimed": ["a.py#use"], "facts": ["a.py#other"]}
    assert got[2]["facts"] == {"added": [], "deleted": [], "modified": [], "skipped": []}


def test_malformed_claim_is_a_mismatch() -> None:
    f = _facts_object()
    got = compare_claim({"edits": "a.py#other", "tests": ["x"]}, f)
    assert [m["field"] for m in got] == ["edits", "tests"]
    assert got[0]["claimed"] == "a.py#other"


def test_a_symlink_and_a_submodule_are_whole_unparsed_files() -> None:
    """Found by the type checker: these two paths called whole_file without its errors."""
    f = facts({"a.py": CLIENT}, {"a.py": CLIENT, "link": b"a.py", "sub": b""},
              new_modes={"link": "120000", "sub": "160000"})
    assert f["added_files"] == ["link", "sub"] and f["adds"] == ["link#<file>", "sub#<file>"]
