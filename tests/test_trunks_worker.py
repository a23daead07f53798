"""A real worker writes every commit that becomes trunk to the trunks table (service/trunk_history.py),
on SQLite and PostgreSQL, once each, in the commit of the entry that made it trunk; stale_trunk,
unknown_base and trunk.distance answer from it, before and after a restart."""
import time

from helpers import acquire, db_rows, propose

TRUNKS = 'SELECT integrations, "commit" FROM trunks ORDER BY integrations'
APP = "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


def integrated(c, token: str, change: str, timeout: float = 30) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = c.call("change.get", {"change": change}, token=token)
        if got["status"]["status"] == "integrated":
            return got["status"]["commit"]
        time.sleep(0.05)
    raise AssertionError(f"{change} is {got['status']}, not integrated")


def test_every_trunk_has_its_row_and_bases_are_judged_by_them(repo_env):
    env, c = repo_env, repo_env.client
    env.policy("[queue]\nmax_behind = 1\n")
    a = env.agent()["token"]
    first = env.trunk
    acquire(c, a, "app.py#charge")
    trunks = [first]
    for n in range(3):
        got = propose(c, a, trunks[-1], {"app.py": APP.replace("amount * 2", f"amount * {n + 3}")})
        assert got["decision"]["outcome"] == "allow", got
        trunks.append(integrated(c, a, got["change"]))
    assert db_rows(env.w, TRUNKS) == list(enumerate(trunks))
    assert c.call("trunk.distance", {"base": first}, token=a)["behind"] == 3
    assert c.call("trunk.distance", {"base": trunks[2]}, token=a)["behind"] == 1
    assert c.call("trunk.distance", {"base": "e" * 40}, token=a)["behind"] is None
    stale = propose(c, a, first, {"app.py": APP.replace("amount * 2", "amount * 9")})
    assert stale["decision"]["outcome"] == "deny" and "stale_trunk" in stale["decision"]["reasons"]
    env.w.stop()
    env.w.start()
    assert db_rows(env.w, TRUNKS) == list(enumerate(trunks))    # the start's replay writes no row twice
    with env.w.client() as c2:
        assert c2.call("trunk.distance", {"base": first}, token=a)["behind"] == 3
        assert c2.call("trunk.distance", {"base": "e" * 40}, token=a)["behind"] is None
