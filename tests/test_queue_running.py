"""queue.running (an addition to the seed, docs/decisions.md): what the merge queue verifies now,
for humans only, read from a real worker while a real check prints over a few seconds: the
round, its candidate, the check with its elapsed time and a tail that grows, bounded, with no
token in it; then nothing once the round is logged. Also status.lists."""
import json
import time

import pytest

from helpers import acquire, propose
from lonca.protocol import LoncaError, STATUS_LISTS
from lonca.service.running_checks import TAIL_BYTES, without_tokens
from test_leases import wait_status

# a long first line (more than the tail keeps), a token-shaped line, then ticks
CHECK = ("import time; print('x' * 20000, flush=True); print('lonca_' + 'ab' * 32, flush=True)\n"
         "for i in range(8):\n    print('tick', i, flush=True); time.sleep(0.4)\n")


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def running(env) -> dict:
    return env.client.call("queue.running", repo="demo", token=env.token)


def test_a_running_check_is_seen_with_its_growing_tail_then_gone(repo_env):
    env = repo_env
    env.policy(f'[verification]\ntests = {json.dumps(["python3", "-c", CHECK])}\n')
    agent = env.agent("ada")["token"]
    assert running(env)["rounds"] == []
    with pytest.raises(LoncaError) as refused:      # humans only: an agent does not watch the queue
        env.client.call("queue.running", token=agent)
    assert refused.value.code == "forbidden"

    c = env.client
    acquire(c, agent, "lib/util.py#helper")
    change = propose(c, agent, env.trunk, {"lib/util.py": "def helper():\n    return 43\n"})["change"]
    seen: list[dict] = []
    deadline = time.time() + 30
    while time.time() < deadline:
        rounds = running(env)["rounds"]
        checks = [k for r in rounds for cand in r["candidates"] for k in cand["checks"]]
        if checks and checks[0]["result"] is None:
            seen.append(checks[0] | {"round": rounds[0]})
            if "tick 5" in checks[0]["tail"]:
                break
        time.sleep(0.2)
    assert len(seen) >= 2, "the check was not seen running"
    first, last = seen[0], seen[-1]
    r = last["round"]
    assert r["kind"] == "integrate" and r["changes"] == [change] and r["candidates"][0]["changes"] == [change]
    assert r["candidates"][0]["ended_ms"] is None and r["candidates"][0]["ok"] is None
    assert last["check"] == "tests" and last["attempt"] == 1 and last["started_ms"] == first["started_ms"]
    assert "tick 5" in last["tail"] and ("tick 5" not in first["tail"])          # it grew
    assert len(last["tail"].encode()) <= TAIL_BYTES and last["tail_truncated"]   # the 20,000 x's were cut
    assert not last["tail"].startswith("x")                                      # from a whole line on
    assert "abab" not in last["tail"] and "lonca_…(hidden)" in last["tail"]      # never a token
    assert wait_status(c, agent, change, "integrated")
    assert running(env)["rounds"] == []


def test_status_lists_names_the_lists_it_answers(repo_env):
    env = repo_env
    whole = env.status()
    assert set(STATUS_LISTS) <= set(whole)
    only = env.client.call("status", {"lists": ["pending"]}, repo="demo", token=env.token)
    assert [k for k in STATUS_LISTS if k in only] == ["pending"]
    assert {k: v for k, v in only.items() if k != "now_ms"} == {k: v for k, v in whole.items() if k not in STATUS_LISTS[:3] + STATUS_LISTS[4:] and k != "now_ms"}
    bare = env.client.call("status", {"lists": []}, repo="demo", token=env.token)
    assert not set(STATUS_LISTS) & set(bare) and bare["next_seq"] == whole["next_seq"]
    for bad in (["pendings"], "pending", ["pending"] * 7):
        with pytest.raises(LoncaError) as refused:
            env.client.call("status", {"lists": bad}, repo="demo", token=env.token)
        assert refused.value.code == "invalid"


def test_tokens_are_hidden_in_a_tail():
    assert without_tokens("a lonca_h_" + "0" * 64 + " b lonca_" + "f" * 64) == "a lonca_…(hidden) b lonca_…(hidden)"
    assert without_tokens("lonca_up and lonca_1234567") == "lonca_up and lonca_1234567"   # too short to be one


def test_queue_run_wakes_the_queue_for_any_human(repo_env):
    """Seed 001's queue.run: any human, no repository named; the answer does not wait for the
    queue (integrated stays 0) and what it lands shows in status."""
    env = repo_env
    agent = env.agent("ada")["token"]
    acquire(env.client, agent, "lib/util.py#helper")
    change = propose(env.client, agent, env.trunk, {"lib/util.py": "def helper():\n    return 43\n"})["change"]
    assert env.client.call("queue.run", token=env.token) == {"integrated": 0, "woken": True}
    wait_status(env.client, agent, change, "integrated")
    for token, code in ((agent, "forbidden"), (None, "unauthenticated")):
        with pytest.raises(LoncaError) as refused:
            env.client.call("queue.run", token=token)
        assert refused.value.code == code
