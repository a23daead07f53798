"""A real worker keeps its settled changes in the settled_changes table (service/settled.py), on
SQLite and PostgreSQL: change.get, change.resolve and a new version of a change read them back
once memory let them go, and after a restart from the checkpoint."""

from helpers import acquire, b64, claim_of, db_rows, propose
from lonca.service.settled import STATUS_WINDOW

APP = "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


def test_settled_changes_are_read_back_from_the_table(repo_env):
    env, c = repo_env, repo_env.client
    a = env.agent()["token"]
    base = env.trunk
    # no lease: each is denied at once (lease_missing), so each settles as it is logged
    denied = [propose(c, a, base, {"app.py": APP.replace("amount * 2", f"amount * {n + 3}")})
              for n in range(STATUS_WINDOW + 3)]
    assert {d["decision"]["outcome"] for d in denied} == {"deny"}
    first = denied[0]["change"]
    rows = db_rows(env.w, 'SELECT change, status FROM settled_changes ORDER BY seq')
    assert [ch for ch, _ in rows] == [d["change"] for d in denied] and {s for _, s in rows} == {"rejected"}
    assert first not in {ch["change"] for ch in env.status()["changes"]}   # out of status's window
    got = c.call("change.get", {"change": first}, token=a)
    assert got["status"]["status"] == "rejected" and got["version"] == 1 and got["claim"]["intent"] == "test change"
    assert c.call("change.resolve", {"prefix": first[:6]}, token=a) == {"change": first}
    acquire(c, a, "app.py#charge")     # a new version of the first, allowed now
    files = [{"path": "app.py", "content_b64": b64(APP.replace("amount * 2", "amount * 9")), "mode": None}]
    facts = c.call("facts.preview", {"base": base, "files": files}, token=a)["facts"]
    again = c.call("change.propose", {"change": first, "base": base, "files": files, "claim": claim_of(facts)}, token=a)
    assert again["decision"]["outcome"] == "allow" and again["change"] == first
    v2 = c.call("change.get", {"change": first}, token=a)
    assert v2["version"] == 2 and v2["versions"] == [got["proposed_seq"], again["seq"]]
    assert v2["created_ms"] == got["created_ms"]    # the first version's, read from the table
    env.w.stop()
    env.w.start()
    with env.w.client() as c2:
        for d in denied[1:3]:
            assert c2.call("change.get", {"change": d["change"]}, token=a)["status"]["status"] == "rejected"
        assert c2.call("change.get", {"change": first}, token=a)["versions"] == v2["versions"]
    assert env.w.cli("audit", "verify").returncode == 0
