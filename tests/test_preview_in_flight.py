"""A preview answers while a batch of entries on other paths is being committed, and never shows an
entry in flight on its own paths that then fails to commit (docs/decisions.md, "A preview waits
only for the entries in flight on its paths"). The commit is held by a real SQLite lock past the
worker's busy timeout (5 s), then fails."""
import contextlib
import threading
import time

import pytest

from helpers import acquire, b64, sqlite_write_locked
from lonca.protocol import LoncaError

CHARGE = "def charge(amount):\n    return amount * 3\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


@contextlib.contextmanager
def held_commit(env, token: str, symbol: str):
    """`symbol` acquired by `token`'s session while the database's write lock is held: its entry
    is applied at once, its commit waits for the lock and fails at the busy timeout. Yields
    (the acquiring thread, [its answer or error code, seconds it took] once it ends); on leaving,
    the acquire has ended and the lock is let go."""
    out: list = []

    def take():
        c = env.w.client(timeout=30).connect()
        t0 = time.monotonic()
        try:
            out.append(acquire(c, token, symbol))
        except LoncaError as e:
            out.append(e.code)
        out.append(time.monotonic() - t0)
        c.close()
    with sqlite_write_locked(env.w.home):
        th = threading.Thread(target=take)
        th.start()
        time.sleep(1.0)     # applied; its commit waits on the lock
        try:
            yield th, out
        finally:
            th.join(30)


def two_agents(env) -> tuple[str, str, str, object]:
    """Agents a and b's tokens, trunk, and a client of the worker."""
    return env.agent("a")["token"], env.agent("b")["token"], env.trunk, env.w.client(timeout=30).connect()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_preview_answers_while_a_batch_on_other_paths_commits(repo_env):
    env = repo_env
    a, b, trunk, c = two_agents(env)
    with held_commit(env, b, "app.py#charge") as (th, taken):
        t0 = time.monotonic()
        res = c.call("facts.preview", {"base": trunk, "files": [
            {"path": "lib/util.py", "content_b64": b64("def helper():\n    return 43\n")}]}, token=a)
        took = time.monotonic() - t0
        assert th.is_alive() and took < 2.0, took     # the held commit is still failing
        assert res["facts"]["edits"] == ["lib/util.py#helper"] and res["acquire"] == [
            {"symbol": "lib/util.py#helper", "kind": "edit"}]
    assert taken[0] == "internal" and taken[1] > 4, taken     # it did fail, at the busy timeout
    c.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_preview_never_shows_an_entry_on_its_paths_that_failed_to_commit(repo_env):
    env = repo_env
    a, b, trunk, c = two_agents(env)
    files = [{"path": "app.py", "content_b64": b64(CHARGE)}]
    with held_commit(env, b, "app.py#charge") as (_th, taken):
        with pytest.raises(LoncaError) as e:    # waits for b's acquire, which it would show held
            c.call("facts.preview", {"base": trunk, "files": files}, token=a)
        assert e.value.code == "internal", e.value
    assert taken[0] == "internal", taken
    deadline = time.monotonic() + 20
    while True:     # once the log is replayed: b holds nothing, the symbol is free
        try:
            res = c.call("facts.preview", {"base": trunk, "files": files}, token=a)
            break
        except LoncaError as e:
            assert e.code == "internal" and time.monotonic() < deadline
            time.sleep(0.2)
    assert [d["code"] for d in res["leases"]] == ["free"], res["leases"]
    c.close()
