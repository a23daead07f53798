"""Leases and proposals over the real socket: who may hold what, and what a proposal needs."""
import base64
import time

import pytest

from helpers import acquire, propose
from lonca.protocol import LoncaError

APP = "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def env(repo_env):
    return repo_env


def test_two_agents_different_functions_in_one_file(env):
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    ra = acquire(c, a, "app.py#charge", intent="double the fee")
    rb = acquire(c, b, "app.py#Client.pay", intent="pay twice")
    assert ra["decision"]["outcome"] == "allow" and rb["decision"]["outcome"] == "allow"
    assert ra["set"] and ra["details"] == [] and ra["advice"] is None
    base = env.trunk
    pa = propose(c, a, base, {"app.py": APP.replace("amount * 2", "amount * 3")})
    pb = propose(c, b, base, {"app.py": APP.replace("return charge(1)", "return charge(2)")})
    assert pa["decision"] == {"outcome": "allow", "reasons": []} and pa["status"] == "queued"
    assert pb["decision"]["outcome"] == "allow", pb["decision"]
    assert pa["facts"]["edits"] == ["app.py#charge"] and pb["facts"]["edits"] == ["app.py#Client.pay"]
    for change in (pa["change"], pb["change"]):  # the queue integrates both, each keeping the other's edit
        wait_status(c, a, change, "integrated")
    files = {f["path"]: f for f in c.call("tree", {"commit": env.trunk, "with_content": True}, token=a)}
    text = base64.b64decode(files["app.py"]["content_b64"]).decode()
    assert "amount * 3" in text and "charge(2)" in text


def wait_status(c, token, change, status, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = c.call("change.get", {"change": change}, token=token)
        if got["status"]["status"] == status:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{change} is {got['status']}, not {status}")


def test_same_function_is_held(env):
    a_s, b = env.agent("alpha"), env.agent("beta")["token"]
    acquire(env.client, a_s["token"], "app.py#charge", intent="rework fees")
    res = acquire(env.client, b, "app.py#charge", intent="me too")
    assert res["decision"]["outcome"] == "deny" and res["set"] is None
    assert res["decision"]["reasons"] == [f"lease_held:app.py#charge:{a_s['session']}:rework fees"]
    d = res["details"][0]
    assert (d["code"], d["holder_session"], d["holder_agent"], d["intent"]) == ("lease_held", a_s["session"], "alpha", "rework fees")
    assert "alpha" in res["advice"] and "negotiate" in res["advice"]
    # containment: the class covers its methods; the file covers everything in it
    assert acquire(env.client, b, "app.py#Client", intent="x")["decision"]["outcome"] == "allow"
    assert acquire(env.client, a_s["token"], "app.py#Client.pay", intent="y")["decision"]["outcome"] == "deny"
    assert acquire(env.client, a_s["token"], "app.py#<file>", intent="y")["decision"]["outcome"] == "deny"


def test_blank_intent_and_bad_items(env):
    a = env.agent()["token"]
    res = acquire(env.client, a, "app.py#charge", intent="  ")
    assert res["decision"] == {"outcome": "deny", "reasons": ["intent_required"]}
    res = acquire(env.client, a, {"symbol": "app.py#charge", "kind": "edit", "names": ["x"]})
    assert "names_need_insert" in res["decision"]["reasons"]
    res = acquire(env.client, a, {"symbol": "app.py#Client", "kind": "insert", "names": ["not a name"]})
    assert "invalid_names" in res["decision"]["reasons"]
    res = acquire(env.client, a, {"symbol": "app.py#charge", "kind": "shared"})
    assert "shared_off" in res["decision"]["reasons"]
    with pytest.raises(LoncaError) as e:
        acquire(env.client, a, {"symbol": "no-hash", "kind": "edit"})
    assert e.value.code == "invalid"


def test_insert_names(env):
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    ins = lambda names: {"symbol": "app.py#Client", "kind": "insert", "names": names}
    assert acquire(c, a, ins(["refund"]))["decision"]["outcome"] == "allow"
    assert acquire(c, b, ins(["void"]))["decision"]["outcome"] == "allow"  # names do not meet
    clash = acquire(c, b, ins(["refund", "other"]))
    assert clash["decision"]["outcome"] == "deny" and clash["details"][0]["code"] == "lease_held"
    base = env.trunk
    added = APP + "\n    def refund(self):\n        return 0\n"
    assert propose(c, a, base, {"app.py": added})["decision"]["outcome"] == "allow"
    wrong = APP + "\n    def chargeback(self):\n        return 0\n"  # a name the insert did not reserve
    res = propose(c, b, base, {"app.py": wrong})
    assert res["decision"]["outcome"] == "deny" and "lease_missing:app.py#Client" in res["decision"]["reasons"]


def test_rename_lease_covers_the_rename(env):
    a = env.agent()["token"]
    c = env.client
    assert acquire(c, a, {"symbol": "lib/util.py#helper", "kind": "rename"})["decision"]["outcome"] == "allow"
    res = propose(c, a, env.trunk, {"lib/util.py": "def assist():\n    return 42\n"})
    assert res["facts"]["renames"] == [["lib/util.py#helper", "lib/util.py#assist"]]
    assert res["decision"]["outcome"] == "allow", res["decision"]


def test_propose_without_a_lease(env):
    a = env.agent()["token"]
    b_s = env.agent("holder")
    acquire(env.client, b_s["token"], "app.py#Client.pay", intent="busy")
    res = propose(env.client, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 5").replace("charge(1)", "charge(3)")})
    assert res["decision"]["outcome"] == "deny" and res["status"] == "denied"
    assert set(res["decision"]["reasons"]) == {"lease_missing:app.py#charge", "lease_missing:app.py#Client.pay"}
    held = [d for d in res["details"] if d["code"] == "lease_held"]
    assert held[0]["holder_session"] == b_s["session"] and held[0]["intent"] == "busy"


def test_claim_mismatch(env):
    a = env.agent()["token"]
    acquire(env.client, a, "app.py#<file>")
    claim = {"intent": "x", "edits": ["app.py#Client.pay"]}
    res = propose(env.client, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 4")}, claim=claim)
    assert res["decision"]["outcome"] == "deny" and "claim_mismatch:edits" in res["decision"]["reasons"]
    assert res["claim_mismatch"][0] == {"field": "edits", "claimed": ["app.py#Client.pay"], "facts": ["app.py#charge"]}


def test_scope_violations(env):
    scope = {"paths": ["lib/**"], "symbols": None, "ops": ["edit"], "max_files": 1, "max_lines": 2, "scratch": []}
    a = env.agent(scope=scope)["token"]
    c = env.client
    res = acquire(c, a, "app.py#charge")
    assert res["decision"]["reasons"] == ["scope_path:app.py"]
    acquire(c, a, "lib/util.py#<file>")
    res = propose(c, a, env.trunk, {"lib/util.py": "def helper():\n    x = 1\n    y = 2\n    return x + y\n",
                                      "lib/new.py": "def more():\n    return 1\n"})
    reasons = set(res["decision"]["reasons"])
    assert {"scope_max_files", "scope_max_lines", "scope_op:insert"} <= reasons


def test_interest_becomes_a_reservation(env):
    holder, waiter, third = env.agent("h"), env.agent("w"), env.agent("t")
    c = env.client
    got = acquire(c, holder["token"], "app.py#charge", intent="long job")
    item = [{"symbol": "app.py#charge", "kind": "edit"}]
    free = c.call("lease.interest", {"items": [{"symbol": "lib/util.py#helper", "kind": "edit"}], "intent": "later"}, token=waiter["token"])
    assert free["decision"]["reasons"] == ["lease_free"]
    res = c.call("lease.interest", {"items": item, "intent": "need it next"}, token=waiter["token"])
    assert res["decision"]["outcome"] == "allow" and res["details"][0]["holder_session"] == holder["session"]
    st = env.status()
    assert st["interests"][0]["session"] == waiter["session"] and st["interests"][0]["blocks_until_ms"] > st["now_ms"]
    c.call("lease.release", {"set": got["set"]}, token=holder["token"])
    st = env.status()
    assert st["reservations"][0]["session"] == waiter["session"] and not st["interests"]
    res = acquire(c, third["token"], "app.py#charge")
    assert res["decision"]["reasons"] == [f"lease_reserved:{waiter['session']}"]
    evs = c.call("events", {"from": 1}, token=waiter["token"])["events"]
    assert any(e["kind"] == "reserved" for e in evs)
    inbox = c.call("inbox", token=waiter["token"])
    assert inbox["events"][0]["kind"] == "reserved" and "acquire" in inbox["text"]
    assert c.call("inbox", token=waiter["token"])["events"] == []  # told once
    assert acquire(c, waiter["token"], "app.py#charge")["decision"]["outcome"] == "allow"
    assert env.status()["reservations"] == []


def test_expiry_by_ttl_and_by_missed_heartbeats(env):
    cfg = '[leases]\ntimeout_ms = 600\n'
    prep = env.client.call("human.prepare_policy", {"config": cfg}, repo="demo", token=env.token)
    env.submit(prep["op"])
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    acquire(c, a, "app.py#charge", ttl_ms=300)
    assert acquire(c, b, "app.py#charge")["decision"]["outcome"] == "deny"
    time.sleep(0.4)
    got = acquire(c, b, "app.py#charge")  # the TTL ran out
    assert got["decision"]["outcome"] == "allow"
    assert all(l["session"] != a for l in env.status()["leases"])
    hb = c.call("session.heartbeat", token=b)
    assert hb["timeout_ms"] == 600 and hb["leases"][0]["set"] == got["set"]
    assert acquire(c, a, "app.py#charge")["decision"]["outcome"] == "deny"
    time.sleep(0.8)  # b misses its heartbeat: its leases are free
    assert acquire(c, a, "app.py#charge")["decision"]["outcome"] == "allow"


def test_critical_path_escalates_then_approve_or_reject(env):
    a_s = env.agent()
    a = a_s["token"]
    c = env.client
    acquire(c, a, "lonca.toml#<file>", "app.py#charge")
    res = propose(c, a, env.trunk, {"lonca.toml": "[leases]\nshared = true\n"})
    assert res["decision"] == {"outcome": "escalate", "reasons": ["critical_path:lonca.toml"]} and res["status"] == "pending"
    pending = env.status()["pending"]
    assert pending[0]["change"] == res["change"] and pending[0]["agent"] == "agent" and pending[0]["paths"] == ["lonca.toml"]
    # a second proposal of the workspace replaces the one waiting
    res2 = propose(c, a, env.trunk, {"lonca.toml": "[leases]\nshared = false\n"})
    assert f"replaces:{res['change']}" in res2["decision"]["reasons"]
    assert c.call("change.get", {"change": res["change"]}, token=a)["status"] == {"status": "withdrawn"}
    seq = env.status()["pending"][0]["seq"]
    ok = env.submit({"op": "approve", "target_seq": seq, "note": "fine"})
    assert ok["decision"]["outcome"] == "allow" and ok["change"] == res2["change"]
    got = wait_status(c, a, res2["change"], "integrated")  # approved: queued, then integrated
    assert got["provenance"] == "reviewed"
    assert any(e["kind"] == "approved" for e in c.call("events", {"from": 1}, token=a)["events"])
    res3 = propose(c, a, env.trunk, {"lonca.toml": "[leases]\nmax_hold_minutes = 5\n"})
    seq3 = next(p["seq"] for p in env.status()["pending"] if p["change"] == res3["change"])
    env.submit({"op": "reject", "target_seq": seq3, "reason": "not now"})
    got = c.call("change.get", {"change": res3["change"]}, token=a)
    assert got["status"] == {"status": "rejected", "reasons": ["rejected: not now"]}
    assert env.submit({"op": "approve", "target_seq": seq3, "note": None})["decision"]["reasons"] == ["not_pending"]


def test_negotiate_yield_and_attenuate(env):
    a_s, b_s = env.agent("a"), env.agent("b")
    c = env.client
    got = acquire(c, a_s["token"], "app.py#charge")
    msg = {"type": "yield", "set": got["set"], "to": b_s["session"]}
    res = c.call("negotiate", {"thread": "t1", "to_session": b_s["session"], "message": msg}, token=a_s["token"])
    assert res["decision"]["outcome"] == "allow"
    kinds = [e["kind"] for e in c.call("events", {"from": 1}, token=b_s["token"])["events"]]
    assert "message" in kinds and "lease_received" in kinds
    assert next(l for l in env.status()["leases"] if l["set"] == got["set"])["session"] == b_s["session"]
    narrow = {"paths": ["app.py"], "symbols": None, "ops": [], "max_files": None, "max_lines": None, "scratch": []}
    child = c.call("cap.attenuate", {"agent": "helper", "scope": narrow, "expires_ms": int(time.time() * 1000) + 60_000,
                                     "leases": [got["set"]]}, token=b_s["token"])
    assert child["decision"]["outcome"] == "allow" and child["token"].startswith("lonca_")
    assert c.call("whoami", token=child["token"])["session"]["parent"] == b_s["session"]
    assert next(l for l in env.status()["leases"] if l["set"] == got["set"])["session"] == child["session"]
    wide = {**narrow, "paths": ["**"]}
    res = c.call("cap.attenuate", {"agent": "x", "scope": wide, "expires_ms": int(time.time() * 1000) + 30_000},
                 token=child["token"])
    assert res["decision"]["reasons"] == ["scope_widening:paths"]
    c.call("session.end", token=child["token"])  # the lent set goes back
    assert next(l for l in env.status()["leases"] if l["set"] == got["set"])["session"] == b_s["session"]


def test_change_readers(env):
    a = env.agent()["token"]
    c = env.client
    acquire(c, a, "app.py#charge")
    res = propose(c, a, env.trunk, {"app.py": APP.replace("amount * 2", "amount * 7")})
    cid = res["change"]
    assert c.call("change.resolve", {"prefix": cid[:8]}, token=a) == {"change": cid}
    diff = c.call("change.diff", {"change": cid}, repo="demo", token=env.token)
    assert diff["files"] == [{"path": "app.py", "status": "modified", "added": 1, "removed": 1,
                              "symbols": {"edits": ["app.py#charge"], "adds": [], "deletes": [], "signature_changes": []}}]
    assert "-    return amount * 2\n+    return amount * 7" in diff["diff"] and not diff["truncated"]
    got = c.call("change.get", {"change": cid}, token=a)
    assert got["facts"]["lines_added"] == 1 and got["version"] == 1 and got["evidence"] == []
    with pytest.raises(LoncaError) as e:
        c.call("change.get", {"change": "k" * 32}, token=a)
    assert e.value.code == "not_found"
    done = wait_status(c, a, cid, "integrated")  # settled: claim and facts read from its proposal entry
    assert (done["claim"], done["facts"]) == (got["claim"], got["facts"]) and got["claim"]["edits"] == ["app.py#charge"]
    assert c.call("change.diff", {"change": cid}, repo="demo", token=env.token)["files"] == diff["files"]
    w = c.call("change.withdraw", {"change": cid}, token=a)
    assert w["decision"]["reasons"] == ["not_in_queue:integrated"]


def test_replay_gives_the_same_leases(env):
    a = env.agent()["token"]
    acquire(env.client, a, "app.py#charge")
    before = env.status()
    env.w.stop()
    env.w.start()
    c = env.w.client().connect()
    after = c.call("status", repo="demo", token=env.token)
    assert after["leases"] == before["leases"] and after["sessions"] == before["sessions"]


def test_a_new_signature_names_the_leases_it_affects(env):
    a, b_s, x_s = env.agent("a")["token"], env.agent("b"), env.agent("x")
    c = env.client
    acquire(c, a, "app.py#charge", intent="add a currency")
    held = acquire(c, b_s["token"], "app.py#Client.pay", intent="pay twice")
    acquire(c, x_s["token"], "lib/util.py#helper", intent="unrelated")
    res = propose(c, a, env.trunk, {"app.py": APP.replace("def charge(amount)", "def charge(amount, currency)")})
    assert res["facts"]["affected"] == ["app.py#Client.pay"]
    assert res["decision"] == {"outcome": "allow", "reasons": [
        "signature_change:app.py#charge", f"affected_lease:{b_s['session']}:{held['set']}"]}


# -- issue 11: one definition per name, leases that add up, advice that is true ------------------

REFUND_AFTER_CHARGE = APP.replace("\n\nclass Client:", "\n\ndef refund(amount):\n    return -amount\n\n\nclass Client:")
REFUND_AT_END = APP + "\n\ndef refund(amount):\n    return amount * -1\n"


def _insert(container: str, *names: str) -> dict:
    return {"symbol": container, "kind": "insert", "names": list(names)}


def _trunk_text(env, token: str, path: str) -> str:
    files = {f["path"]: f for f in env.client.call("tree", {"commit": env.trunk, "with_content": True}, token=token)}
    return base64.b64decode(files[path]["content_b64"]).decode()


def _integrated_and_released(env, token: str, lease: dict, base: str, text: str) -> None:
    res = propose(env.client, token, base, {"app.py": text})
    assert res["decision"]["outcome"] == "allow", res["decision"]
    wait_status(env.client, token, res["change"], "integrated")
    assert env.client.call("lease.release", {"set": lease["set"]}, token=token)["decision"]["outcome"] == "allow"


def test_same_new_function_added_by_two_agents_is_a_conflict(env):
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    old_base = env.trunk
    la = acquire(c, a, _insert("app.py#<file>", "refund"), intent="add refunds")
    # b's insert names nothing, so it meets no reserved name, and trunk has no refund yet
    assert acquire(c, b, {"symbol": "app.py#<file>", "kind": "insert"}, intent="add things")["decision"]["outcome"] == "allow"
    _integrated_and_released(env, a, la, old_base, REFUND_AFTER_CHARGE)
    # from its older base, b adds the same function elsewhere in the file: git merges it cleanly
    res = propose(c, b, old_base, {"app.py": REFUND_AT_END})
    assert res["decision"]["outcome"] == "allow", res["decision"]
    got = wait_status(c, b, res["change"], "conflicted")
    assert got["status"] == {"status": "conflicted", "symbols": ["app.py#refund"]}
    assert _trunk_text(env, a, "app.py").count("def refund") == 1


def test_rename_onto_a_name_trunk_added_since_the_base_is_a_conflict(env):
    a, b = env.agent("a")["token"], env.agent("b")["token"]
    c = env.client
    old_base = env.trunk
    la = acquire(c, a, _insert("app.py#<file>", "refund"), intent="add refunds")
    _integrated_and_released(env, a, la, old_base, REFUND_AFTER_CHARGE)
    acquire(c, b, {"symbol": "lib/util.py#helper", "kind": "rename"}, intent="rename helper")
    assert acquire(c, b, {"symbol": "app.py#charge", "kind": "rename"}, intent="charge is a refund")["decision"]["outcome"] == "allow"
    res = propose(c, b, old_base, {"app.py": APP.replace("def charge(amount)", "def refund(amount)")})
    assert res["facts"]["renames"] == [["app.py#charge", "app.py#refund"]]
    assert res["decision"]["outcome"] == "allow", res["decision"]
    got = wait_status(c, b, res["change"], "conflicted")
    assert "app.py#refund" in got["status"]["symbols"]
    assert _trunk_text(env, a, "app.py").count("def refund") == 1


def test_rename_onto_a_reserved_name_is_name_reserved(env):
    a_s, b = env.agent("a"), env.agent("b")["token"]
    c = env.client
    held = acquire(c, a_s["token"], _insert("app.py#<file>", "refund"), intent="add refunds")
    assert acquire(c, b, {"symbol": "app.py#charge", "kind": "rename"}, intent="rename")["decision"]["outcome"] == "allow"
    res = propose(c, b, env.trunk, {"app.py": APP.replace("def charge(amount)", "def refund(amount)")})
    assert res["decision"]["outcome"] == "deny"
    assert f"name_reserved:app.py#refund:{a_s['session']}" in res["decision"]["reasons"]
    d = next(x for x in res["details"] if x["code"] == "name_reserved")
    assert (d["symbol"], d["names"], d["holder_session"], d["holder_agent"], d["set"]) == \
        ("app.py#<file>", ["refund"], a_s["session"], "a", held["set"])
    assert res["advice"].startswith("refund in app.py#<file> is reserved by a (session") and "another name" in res["advice"]


def test_insert_onto_a_reserved_name_is_name_reserved(env):
    a_s, b = env.agent("a"), env.agent("b")["token"]
    c = env.client
    acquire(c, a_s["token"], _insert("app.py#Client", "refund"), intent="add refunds")
    res = acquire(c, b, _insert("app.py#Client", "void", "refund"), intent="more")
    assert res["decision"]["outcome"] == "deny"
    assert f"name_reserved:app.py#Client.refund:{a_s['session']}" in res["decision"]["reasons"]
    assert res["details"][0]["names"] == ["refund"] and res["details"][0]["holder_agent"] == "a"


def test_insert_or_rename_onto_an_existing_name_is_refused(env):
    a = env.agent("a")["token"]
    c = env.client
    res = acquire(c, a, _insert("app.py#Client", "pay"), intent="a second pay")
    assert res["decision"] == {"outcome": "deny", "reasons": ["conflict:app.py#Client.pay"]}
    assert res["details"] == [{"code": "conflict", "symbol": "app.py#Client", "needed_kind": "insert", "names": ["pay"],
                               "holder_session": None, "holder_agent": None, "intent": None, "expires_ms": None,
                               "set": None, "pinned_to": None}]
    assert "already defines pay" in res["advice"]
    # a rename onto a name the base defines: the facts number the second definition
    acquire(c, a, {"symbol": "app.py#Client", "kind": "edit"}, intent="rework the client")
    acquire(c, a, {"symbol": "app.py#charge", "kind": "rename"}, intent="rename charge")
    text = APP + "\n\ndef pay():\n    return 0\n"
    acquire(c, a, _insert("app.py#<file>", "pay"), intent="a top-level pay")
    assert propose(c, a, env.trunk, {"app.py": text})["decision"]["outcome"] == "allow"  # another scope
    renamed = APP.replace("def pay(self):\n        return charge(1)\n", "def pay(self):\n        return charge(1)\n"
                          "    def payment(self):\n        return 2\n")
    acquire(c, a, _insert("app.py#Client", "payment"), intent="payments")
    base = env.trunk
    onto = renamed.replace("def payment(self)", "def pay(self)")
    res = propose(c, a, base, {"app.py": onto})
    assert res["decision"]["outcome"] == "deny" and "conflict:app.py#Client.pay" in res["decision"]["reasons"]


def test_one_insert_lease_per_new_function(env):
    a = env.agent("a")["token"]
    c = env.client
    got = acquire(c, a, _insert("app.py#Client", "refund"), _insert("app.py#Client", "void"), intent="two methods")
    assert got["decision"]["outcome"] == "allow"
    both = APP + "    def refund(self):\n        return 0\n    def void(self):\n        return 1\n"
    res = propose(c, a, env.trunk, {"app.py": both})
    assert res["decision"]["outcome"] == "allow", res["decision"]
    assert res["details"] == [] and res["advice"] is None


def test_refusal_details_carry_names_and_only_what_is_missing(env):
    a = env.agent("a")["token"]
    c = env.client
    acquire(c, a, _insert("app.py#Client", "refund"), intent="one method")
    three = APP + "    def refund(self):\n        return 0\n    def void(self):\n        return 1\n"
    res = propose(c, a, env.trunk, {"app.py": three})
    assert res["decision"]["outcome"] == "deny" and res["decision"]["reasons"] == ["lease_missing:app.py#Client"]
    assert [(d["code"], d["symbol"], d["needed_kind"], d["names"]) for d in res["details"]] == \
        [("free", "app.py#Client", "insert", ["void"])]
    pre = c.call("facts.preview", {"base": env.trunk, "files": [{"path": "app.py", "content_b64": base64.b64encode(three.encode()).decode(),
                                                                  "mode": None}]}, token=a)
    assert pre["acquire"] == [{"symbol": "app.py#Client", "kind": "insert", "names": ["void"]}]


def test_advice_is_true_about_holders_and_own_leases(env):
    me_s, other = env.agent("me"), env.agent("other")
    c = env.client
    acquire(c, me_s["token"], "app.py#charge", intent="mine")
    acquire(c, other["token"], "app.py#Client.pay", intent="theirs")
    res = propose(c, me_s["token"], env.trunk, {"app.py": APP.replace("amount * 2", "amount * 3").replace("charge(1)", "charge(9)")})
    assert res["decision"]["outcome"] == "deny"
    assert "None" not in res["advice"] and me_s["session"] not in res["advice"]
    assert res["advice"].startswith("app.py#Client.pay is held by other") and "negotiate" in res["advice"]
    # a reservation is called one
    waiter = env.agent("waiter")
    c.call("lease.interest", {"items": [{"symbol": "app.py#Client.pay", "kind": "edit"}], "intent": "next"}, token=waiter["token"])
    c.call("lease.release", {"set": next(l["set"] for l in env.status()["leases"] if l["session"] == other["session"])},
           token=other["token"])
    res = acquire(c, me_s["token"], "app.py#Client.pay", intent="me first")
    assert res["decision"]["reasons"] == [f"lease_reserved:{waiter['session']}"]
    assert "reserved for waiter" in res["advice"] and "held" not in res["advice"]
