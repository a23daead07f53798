"""The merge queue in independent lanes and with flaky retries, in a real worker: real git store,
real check processes, `lonca audit verify` over the result."""
import json
import time

import pygit2
import pytest

from helpers import acquire, propose
from test_leases import wait_status

# sleeps, then fails on a candidate holding BAD; FLAKY fails its first run (a marker outside the
# tree, named in argv, remembers it)
CHECK = ("import sys, time, pathlib; time.sleep({delay}); marker = pathlib.Path(sys.argv[1]); "
         "files = list(pathlib.Path('.').rglob('*.py')); text = [p.read_text() for p in files]; "
         "bad = [str(p) for p, t in zip(files, text) if 'BAD' in t]; flaky = any('FLAKY' in t for t in text); "
         "first = flaky and not marker.exists(); marker.touch() if first else None; "
         "print('checked', len(files), 'files; bad:', bad, '; flaky first run' if first else ''); "
         "sys.exit(1 if bad or first else 0)")


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


def _policy(env, tmp_path, delay, extra):
    argv = json.dumps(["python3", "-c", CHECK.format(delay=delay), str(tmp_path / "flaky-marker")])
    env.policy(f'[verification]\ntests = {argv}\nbatch_size = 8\n{extra}')


def _trees_have_their_attestations(env):
    """Every allowed integration's new trunk tree is the subject of a passing attestation of
    each check it carries (what `lonca audit verify` re-checks too)."""
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))
    landed = 0
    for e in env.log():
        entry = e["entry"]
        op = entry["op"]
        if op["op"] not in ("change.integrate", "change.integrate_batch") or entry["decision"]["outcome"] != "allow":
            continue
        head = op["merged"] if op["op"] == "change.integrate" else op["merged"][-1][1]
        tree = str(store[head].peel(pygit2.Commit).tree_id)
        finals = [a for a in entry["evidence"] if a["details"].get("attempt") == a["details"].get("attempts")]
        assert finals and all(a["subject_tree"] == tree and a["result"] == "pass" for a in finals)
        landed += 1
    return landed


def test_independent_lanes_land_what_passed_and_reject_each_culprit(repo_env, tmp_path):
    env = repo_env
    _policy(env, tmp_path, 1.0, '[queue]\nrunners = 3\nrounds = "pipelined"\n')
    c = env.client
    base = env.status()["trunk"]
    first = env.agent("first")["token"]
    acquire(c, first, "lib/first.py#<file>")
    head = propose(c, first, base, {"lib/first.py": "def first():\n    return 1\n"})
    time.sleep(0.3)  # the queue is verifying `head` alone; the next six wait and form one round
    changes = []
    for i in range(6):
        t = env.agent(f"agent{i}")["token"]
        acquire(c, t, f"lib/f{i}.py#<file>")
        body = f"def f{i}():\n    return {'BAD' if i in (1, 4) else i}\n"
        changes.append((propose(c, t, base, {f"lib/f{i}.py": body})["change"], t))
    wait_status(c, first, head["change"], "integrated")
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))

    def lib_files(rev: str) -> set[str]:
        tree = store[rev].peel(pygit2.Tree)
        return {e.name for e in store[tree["lib"].id]} if "lib" in tree else set()
    for i, (cid, t) in enumerate(changes):
        if i in (1, 4):
            got = wait_status(c, t, cid, "rejected", timeout=90)
            assert got["status"]["reasons"] == ["verification_failed:tests"]
            [ev] = got["evidence"]
            assert ev["result"] == "fail" and f"lib/f{i}.py" in ev["log"]
            # rejected on a tree of its own lane: trunk and itself, nothing of the others
            att = next(e["entry"] for e in env.log() if e["entry"]["seq"] == got["integrate_seq"])["evidence"][0]
            assert lib_files(att["subject_tree"]) == lib_files(base) | {"first.py", f"f{i}.py"}
        else:
            assert wait_status(c, t, cid, "integrated", timeout=90)["evidence"][0]["result"] == "pass"
    # both culprits were found in one round (a single batch finds one a round, on another trunk)
    rejections = [e["entry"]["op"] for e in env.log() if e["entry"]["op"]["op"] == "change.integrate"
                  and e["entry"]["decision"]["outcome"] == "deny"]
    assert len(rejections) == 2 and rejections[0]["trunk_before"] == rejections[1]["trunk_before"]
    landings = _trees_have_their_attestations(env)
    assert landings >= 2
    res = env.w.cli("audit", "verify", "--json")
    assert res.returncode == 0, res.stderr
    [report] = json.loads(res.stdout)["logs"]
    assert report["trees_compared"] and report["checked_landings"] == landings
    # a store that lacks the integrated commits can not vouch for them
    pygit2.init_repository(str(tmp_path / "elsewhere" / "demo.git"), bare=True)
    res = env.w.cli("audit", "verify", "--json", "--stores", str(tmp_path / "elsewhere"))
    assert res.returncode == 1 and "not in the repository's store" in json.loads(res.stdout)["logs"][0]["reason"]


def test_a_check_that_passes_on_a_retry_is_flaky_with_each_attempt_attested(repo_env, tmp_path):
    env = repo_env
    _policy(env, tmp_path, 0, "retries = 1\n")
    c = env.client
    a = env.agent()["token"]
    acquire(c, a, "lib/flaky.py#<file>")
    res = propose(c, a, env.status()["trunk"], {"lib/flaky.py": "def f():\n    return 'FLAKY'\n"})
    got = wait_status(c, a, res["change"], "integrated", timeout=60)
    [ev] = got["evidence"]                       # one check, its two attempts together
    assert (ev["check"], ev["result"], ev["attempts"]) == ("tests", "pass", 2)
    assert ev["details"]["flaky"] == "true" and "flaky first run" not in ev["log"]
    entry = next(e["entry"] for e in env.log() if e["entry"]["seq"] == got["integrate_seq"])
    first, second = entry["evidence"]
    assert (first["result"], second["result"]) == ("fail", "pass")
    assert first["log"] != second["log"]        # each attempt's own output tail
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))
    assert b"flaky first run" in store[first["log"]].data and b"flaky first run" not in store[second["log"]].data
    assert ev["duration_ms"] == int(first["details"]["duration_ms"]) + int(second["details"]["duration_ms"])
    assert env.status()["flaky"] == {"tests": 1}
    assert _trees_have_their_attestations(env) == 1
    env.w.stop()
    env.w.start()                                # counted again the same from the log
    c2 = env.w.client().connect()
    try:
        assert c2.call("status", {}, repo="demo", token=env.token)["flaky"] == {"tests": 1}
    finally:
        c2.close()


def test_a_human_signed_priority_goes_ahead_of_what_it_is_independent_of(repo_env, tmp_path):
    env = repo_env
    gate = tmp_path / "gate"
    gate.touch()   # the first check waits while it exists: the queue stands still meanwhile
    wait = "import pathlib, sys, time; g = pathlib.Path(sys.argv[1]); t = time.time() + 60\nwhile g.exists() and time.time() < t: time.sleep(0.05)"
    env.policy(f'[verification]\ntests = {json.dumps(["python3", "-c", wait, str(gate)])}\nbatch_size = 1\n')
    c = env.client
    base = env.status()["trunk"]
    ids = {}
    for name in ("head", "a", "b", "urgent"):
        t = env.agent(name)["token"]
        acquire(c, t, f"lib/{name}.py#<file>")
        ids[name] = (propose(c, t, base, {f"lib/{name}.py": f"def {name}():\n    return 1\n"})["change"], t)
    time.sleep(0.3)  # `head` is being verified
    res = env.submit({"op": "priority", "change": ids["urgent"][0]})
    assert res["decision"]["outcome"] == "allow" and res["change"] == ids["urgent"][0]
    again = env.w.cli("priority", ids["urgent"][0][:8], "--json")      # the CLI, by a prefix
    assert again.returncode == 1, again.stderr
    assert json.loads(again.stdout)["decision"] == {"outcome": "deny", "reasons": ["already_priority"]}
    assert c.call("change.get", {"change": ids["urgent"][0]}, token=ids["urgent"][1])["priority_seq"] == res["seq"]
    gate.unlink()
    for name in ("head", "a", "b", "urgent"):
        wait_status(c, ids[name][1], ids[name][0], "integrated", timeout=60)
    order = [e["entry"]["op"]["change"] for e in env.log() if e["entry"]["op"]["op"] == "change.integrate"]
    assert order == [ids[n][0] for n in ("head", "urgent", "a", "b")]
    late = env.submit({"op": "priority", "change": ids["a"][0]})
    assert late["decision"] == {"outcome": "deny", "reasons": ["not_queued"]}


def _propose_each(env, names: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """name -> (change, token): each agent leases and proposes lib/<name>.py on one base, `b`'s
    carrying BAD; `first` goes alone, so the next three make one round (batch_size 3)."""
    base = env.status()["trunk"]
    ids = {}
    for name in names:
        token = env.agent(name)["token"]
        acquire(env.client, token, f"lib/{name}.py#<file>")
        body = f"def {name}():\n    return {'BAD' if name == 'b' else 1}\n"
        ids[name] = (propose(env.client, token, base, {f"lib/{name}.py": body})["change"], token)
        if name == "first":
            time.sleep(0.3)     # `first` is verified alone
    return ids


def test_the_next_round_runs_on_the_tree_a_round_is_about_to_land(repo_env, tmp_path):
    # pipelining: a round of a, b (failing), c announces a + c as the tree it lands; the next
    # round, d and e, is built on that tree and its checks start before a + c is logged
    spans = tmp_path / "spans.txt"
    check = ("import json, pathlib, sys, time; start = time.time(); time.sleep(1.5); "
             "names = sorted(p.name for p in pathlib.Path('lib').glob('*.py')); "
             "bad = any('BAD' in (pathlib.Path('lib') / n).read_text() for n in names); "
             "open(sys.argv[1], 'a').write(json.dumps([start, names]) + '\\n'); sys.exit(1 if bad else 0)")
    env = repo_env
    env.policy(f'[verification]\ntests = {json.dumps(["python3", "-c", check, str(spans)])}\nbatch_size = 3\n'
               '[queue]\nrunners = 4\nrounds = "pipelined"\n')
    c = env.client
    ids = _propose_each(env, ("first", "a", "b", "c", "d", "e"))
    for name, (cid, t) in ids.items():
        wait_status(c, t, cid, "rejected" if name == "b" else "integrated", timeout=90)
    entries = [e["entry"] for e in env.log()]
    landings = [e for e in entries if e["op"]["op"] in ("change.integrate", "change.integrate_batch")
                and e["decision"]["outcome"] == "allow"]
    changes = {v[0]: k for k, v in ids.items()}
    merged = [[changes[cid] for cid, _ in e["op"]["merged"]] if e["op"]["op"] == "change.integrate_batch"
              else [changes[e["op"]["change"]]] for e in landings]
    assert merged == [["first"], ["a", "c"], ["d", "e"]]
    assert landings[2]["op"]["trunk_before"] == landings[1]["op"]["merged"][-1][1]
    # a check of a tree holding d started before a + c was logged (and so before it was checked)
    starts = [json.loads(line) for line in spans.read_text().splitlines()]
    assert min(start for start, names in starts if "d.py" in names) * 1000 < landings[1]["time_ms"]
    assert _trees_have_their_attestations(env) == 3
    res = env.w.cli("audit", "verify", "--json")
    assert res.returncode == 0, res.stderr


def test_a_round_built_on_an_announced_tree_that_fails_is_thrown_away(repo_env, tmp_path):
    # t and p pass apart and fail together; b fails. The round of t, p, b announces t + p, and
    # the next round (d, e) starts on it; t + p fails, so the round lands t alone, and the next
    # round, built on a tree that never became trunk, is not logged: d and e are checked again on
    # the real trunk and land there, p is rejected on t + p
    spans = tmp_path / "seen.txt"
    check = ("import json, pathlib, sys, time; time.sleep(1.0); lib = pathlib.Path('lib'); "
             "names = {p.name for p in lib.glob('*.py')}; "
             "bad = any('BAD' in (lib / n).read_text() for n in names); "
             "open(sys.argv[1], 'a').write(json.dumps(sorted(names)) + '\\n'); "
             "sys.exit(1 if bad or {'t.py', 'p.py'} <= names else 0)")
    env = repo_env
    env.policy(f'[verification]\ntests = {json.dumps(["python3", "-c", check, str(spans)])}\nbatch_size = 3\n'
               '[queue]\nrunners = 4\nrounds = "pipelined"\n')
    c = env.client
    base = env.status()["trunk"]
    ids = _propose_each(env, ("first", "t", "p", "b", "d", "e"))
    outcome = {n: "rejected" if n in ("p", "b") else "integrated" for n in ids}
    for name, (cid, tok) in ids.items():
        wait_status(c, tok, cid, outcome[name], timeout=120)
    entries = [e["entry"] for e in env.log()]
    trunks = {e["op"]["trunk_before"] for e in entries if e["op"]["op"] in ("change.integrate", "change.integrate_batch")}
    landed = [e for e in entries if e["op"]["op"] in ("change.integrate", "change.integrate_batch")
              and e["decision"]["outcome"] == "allow"]
    heads = [e["op"]["merged"] if e["op"]["op"] == "change.integrate" else e["op"]["merged"][-1][1] for e in landed]
    # every decision was taken on a tree that was trunk: the first base, or a landed head
    assert trunks <= {base, *heads}
    for i in range(1, len(landed)):
        assert landed[i]["op"]["trunk_before"] == heads[i - 1]
    assert _trees_have_their_attestations(env) == len(landed)
    res = env.w.cli("audit", "verify", "--json")
    assert res.returncode == 0, res.stderr
    # the next round did run on t + p, the tree that never became trunk
    seen = [set(json.loads(line)) for line in spans.read_text().splitlines()]
    assert any({"t.py", "p.py", "d.py"} <= names for names in seen)


def test_screened_rounds_check_groups_of_the_failure_rate_and_reject_each_culprit_alone(repo_env, tmp_path):
    # [queue] rounds = "screened" (the default): after `first`, eight fresh changes go in as many
    # groups as the 4 runners (at most Dorfman's four at the prior failure rate, 1 / 11): pairs,
    # each on trunk; two fail (f2 f3, f4 f5), so their lanes are checked alone next: each culprit
    # is rejected on trunk + itself, the rest lands on trees checked as they are
    seen = tmp_path / "seen.txt"
    check = ("import json, pathlib, sys, time; time.sleep(0.5); lib = pathlib.Path('lib'); "
             "names = sorted(p.stem for p in lib.glob('*.py')); "
             "open(sys.argv[1], 'a').write(json.dumps(names) + '\\n'); "
             "sys.exit(1 if any('BAD' in (lib / (n + '.py')).read_text() for n in names) else 0)")
    env = repo_env
    env.policy(f'[verification]\ntests = {json.dumps(["python3", "-c", check, str(seen)])}\nbatch_size = 8\n'
               '[queue]\nrunners = 4\n')
    c = env.client
    base = env.status()["trunk"]
    names = ["first"] + [f"f{i}" for i in range(8)]
    ids = {}
    for name in names:
        token = env.agent(name)["token"]
        acquire(c, token, f"lib/{name}.py#<file>")
        body = f"def {name}():\n    return {'BAD' if name in ('f2', 'f5') else 1}\n"
        ids[name] = (propose(c, token, base, {f"lib/{name}.py": body})["change"], token)
        if name == "first":
            time.sleep(0.2)     # `first` is checked alone; the eight wait for it
    store = pygit2.Repository(str(env.w.home / "repos" / "demo.git"))

    def lib(rev: str) -> set[str]:
        tree = store[rev].peel(pygit2.Tree)
        return {e.name for e in store[tree["lib"].id]} if "lib" in tree else set()
    for name, (cid, token) in ids.items():
        got = wait_status(c, token, cid, "rejected" if name in ("f2", "f5") else "integrated", timeout=90)
        if name in ("f2", "f5"):
            att = next(e["entry"] for e in env.log() if e["entry"]["seq"] == got["integrate_seq"])["evidence"][0]
            assert att["result"] == "fail"
            rest = {e["entry"]["op"].get("merged") if e["entry"]["op"]["op"] == "change.integrate"
                    else e["entry"]["op"]["merged"][-1][1] for e in env.log()
                    if e["entry"]["op"]["op"] in ("change.integrate", "change.integrate_batch")
                    and e["entry"]["decision"]["outcome"] == "allow"}
            # the failing tree: a trunk of the log and the culprit alone
            assert any(lib(att["subject_tree"]) == lib(t) | {f"{name}.py"} for t in rest | {base})
    had = {n.removesuffix(".py") for n in lib(base)} | {"first"}
    checked = [set(json.loads(line)) - had for line in seen.read_text().splitlines()]
    assert all({f"f{i}", f"f{i + 1}"} in checked for i in range(0, 8, 2))
    assert _trees_have_their_attestations(env) >= 2
    res = env.w.cli("audit", "verify", "--json")
    assert res.returncode == 0, res.stderr
