"""`lonca audit verify`'s landing check: an allowed integration carries passing checks of exactly
the tree it put on trunk. Entries made by hand, trees from a real git store."""
import pygit2

from lonca.audit import landing_problem, landing_problems

SIG = pygit2.Signature("t", "t@lonca.invalid", 1_700_000_000, 0)


def _store(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "demo.git"), bare=True)

    def commit(text: bytes, parents: list) -> str:
        index = pygit2.Index()
        index.add(pygit2.IndexEntry("a.txt", repo.create_blob(text), pygit2.enums.FileMode.BLOB))
        return str(repo.create_commit(None, SIG, SIG, "c", index.write_tree(repo), parents))
    base = commit(b"base\n", [])
    one = commit(b"one\n", [base])
    two = commit(b"two\n", [one])

    def tree_of(c: str) -> str | None:
        try:
            return str(repo[c].peel(pygit2.Commit).tree_id)
        except (KeyError, ValueError):
            return None
    return base, one, two, tree_of


def _att(tree, result="pass", **details):
    return {"check": "tests", "result": result, "subject_tree": tree, "details": details, "env": "0" * 64,
            "log": None, "producer": "lonca.queue"}


def _entry(seq, op, evidence, outcome="allow"):
    return {"seq": seq, "op": op, "evidence": evidence, "decision": {"outcome": outcome, "reasons": []}}


def test_each_landing_against_its_tree(tmp_path):
    base, one, two, tree_of = _store(tmp_path)
    single = {"op": "change.integrate", "change": "k" * 32, "trunk_before": base, "merged": one, "conflicts": []}
    batch = {"op": "change.integrate_batch", "trunk_before": base, "merged": [["k" * 32, one], ["l" * 32, two]]}
    assert landing_problem(_entry(2, single, [_att(tree_of(one))]), tree_of) is None
    assert landing_problem(_entry(2, batch, [_att(tree_of(two))]), tree_of) is None
    # a batch vouched for by its first commit's tree: the tip was never checked
    why = landing_problem(_entry(2, batch, [_att(tree_of(one))]), tree_of)
    assert why and "never checked" in why
    # retries: the failed first attempt is not the result; a last attempt that failed is
    flaky = [_att(tree_of(one), "fail", attempt="1", attempts="2"), _att(tree_of(one), attempt="2", attempts="2", flaky="true")]
    assert landing_problem(_entry(2, single, flaky), tree_of) is None
    failed = [flaky[0], _att(tree_of(one), "fail", attempt="2", attempts="2")]
    assert "ended 'fail'" in landing_problem(_entry(2, single, failed), tree_of)
    # checks of two trees, or a commit the store lacks
    assert "2 different trees" in landing_problem(_entry(2, single, [_att(tree_of(one)), _att(tree_of(two))]), tree_of)
    gone = dict(single, merged="f" * 40)
    assert "not in the repository's store" in landing_problem(_entry(2, gone, [_att(tree_of(one))]), tree_of)
    # without a store the trees are not compared; a denial or an integration without checks says nothing
    assert landing_problem(_entry(2, batch, [_att(tree_of(one))]), None) is None
    assert landing_problem(_entry(2, dict(single, merged=None), [_att(tree_of(one), "fail")], "deny"), tree_of) is None
    assert landing_problem(_entry(2, single, []), tree_of) is None


def test_the_first_problem_of_a_log(tmp_path):
    import json
    base, one, two, tree_of = _store(tmp_path)
    ok = _entry(2, {"op": "change.integrate", "change": "k" * 32, "trunk_before": base, "merged": one, "conflicts": []},
                [_att(tree_of(one))])
    bad = _entry(3, {"op": "change.integrate", "change": "l" * 32, "trunk_before": one, "merged": two, "conflicts": []},
                 [_att(tree_of(one))])
    rows = [(json.dumps(e), "", "") for e in (ok, bad)]
    count, problem = landing_problems(rows, tree_of)
    assert count == 1 and problem.seq == 3
    assert landing_problems(rows[:1], tree_of) == (1, None)
