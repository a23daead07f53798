"""A real worker writes every commit that becomes trunk to the trunks table (service/trunk_history.py),
on SQLite and PostgreSQL, once each, in the commit of the entry that made it trunk; stale_trunk,
unknown_base and trunk.distance answer from it, before and after a restart; trunk.bundle, asked
while trunk moves, bundles the trunk it names."""
import base64
import threading
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


def test_a_bundle_asked_for_while_trunk_moves_is_of_the_trunk_it_names(repo_env):
    """trunk.bundle while the queue integrates: git bundle create resolves its ref twice and writes
    none when trunk moves in between; the worker bundles the trunk it read, so every answer holds
    that trunk as the bundle's only head and none fails."""
    env, c = repo_env, repo_env.client
    a = env.agent()["token"]
    acquire(c, a, "app.py#charge")
    landed: list[str] = []
    first = env.trunk   # read on this thread: c is not shared with the lander's

    def land() -> None:
        with env.w.client() as c2:
            base = first
            for n in range(8):
                got = propose(c2, a, base, {"app.py": APP.replace("amount * 2", f"amount * {n + 3}")})
                assert got["decision"]["outcome"] == "allow", got
                base = integrated(c2, a, got["change"])
                landed.append(base)

    lander = threading.Thread(target=land)
    lander.start()
    answers = 0
    while lander.is_alive() or not answers:
        got = c.call("trunk.bundle", {"have": []}, token=a)
        header = base64.b64decode(got["bundle_b64"]).split(b"\n\n", 1)[0].decode().splitlines()
        assert header[1:] == [f"{got['trunk']} refs/heads/main"], (header, got["trunk"])
        answers += 1
    lander.join()
    assert len(landed) == 8 and answers > 1
