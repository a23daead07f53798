"""An entry's footprint (service/footprint.py) names everything a path-scoped read could see it
change: over random logs of sessions acquiring (granted and refused), renewing, releasing and
beating on a few paths while time passes, every entry with a footprint leaves unchanged what a
read of any path outside it reads (the sets there, their items and expiries, their sessions'
records) and every session outside it (its record and its own sets). An entry by whose time
something expires has none."""
import copy
import random

from lonca.service import footprint
from lonca.service.lease_model import split
from lonca.service.state import State

from entries import Chain

PATHS = ["a.py", "b.py", "c.py", "d/e.py"]
SESSIONS = ["s1", "s2", "s3"]


def path_view(st: State, path: str) -> list:
    """What facts.preview reads for one path: the sets there, and their sessions' records."""
    rs = st.repos["demo"]
    out = []
    for sid, held in sorted(rs.index.on_path(path).items()):
        s = rs.sets[sid]
        out.append((sid, s.session, s.expires_ms, s.wanted_ms, sorted(map(repr, held)), session_record(st, s.session)))
    return out


def session_record(st: State, session: str) -> tuple:
    rec = st.repos["demo"].sessions.get(session)
    return None if rec is None else (rec.ended, rec.expires_ms, rec.last_seen_ms, rec.agent)


def session_view(st: State, session: str) -> tuple:
    """A session's record and its own sets (what a read of its own leases reads)."""
    rs = st.repos["demo"]
    own = [(sid, rs.sets[sid].expires_ms, repr(rs.sets[sid].items), repr(rs.sets[sid].pinned))
           for sid in sorted(rs.sets_by_session.get(session, ()))]
    return session_record(st, session), own


def views(st: State) -> tuple[dict, dict]:
    return {p: path_view(st, p) for p in PATHS}, {s: session_view(st, s) for s in SESSIONS}


def random_entry(chain: Chain, st: State, rng: random.Random, n: int) -> dict:
    rs = st.repos["demo"]
    who = rng.choice(SESSIONS)
    roll = rng.random()
    mine = sorted(rs.sets_by_session.get(who, ()))
    if roll < 0.4:
        symbols = [f"{p}#f{rng.randrange(3)}" for p in rng.sample(PATHS, rng.randint(1, 2))]
        held = rs.holders([{"symbol": x, "kind": "edit"} for x in symbols], who, chain.clock())
        reuse = mine and rng.random() < 0.3
        return chain.acquire(who, mine[0] if reuse else f"set{n}", symbols, ttl_ms=rng.choice([2_000, 60_000]),
                             outcome="deny" if held else "allow")
    if roll < 0.55 and mine:
        return chain.add({"op": "lease.renew", "set": rng.choice(mine), "ttl_ms": 30_000}, actor={
            "kind": "agent", "session": who, "agent": f"agent-{who}"})
    if roll < 0.75 and mine:
        return chain.release(who, rng.choice(mine))
    return chain.beat(who)


def test_an_entry_changes_nothing_outside_its_footprint():
    rng = random.Random(18)
    checked = none = 0
    for _ in range(40):
        chain, st = Chain(), State()
        for e, h, _sig in chain.rows:
            st.apply("demo", e, h)
        for s in SESSIONS:
            e = chain.start(s, ttl_ms=rng.choice([5_000, 3_600_000]))
            st.apply("demo", e, chain.rows[-1][1])
        for n in range(60):
            chain.clock.step(rng.choice([1, 10, 500, 1_500]))
            entry = random_entry(chain, st, rng, n)
            before = copy.deepcopy(views(st))
            fp = footprint.apply(st, "demo", entry, chain.rows[-1][1])
            if fp is None:
                none += 1
                continue
            paths, sessions = views(st)
            for p in PATHS:
                if p not in fp.paths and not {v[1] for v in before[0][p]} & fp.sessions:
                    assert paths[p] == before[0][p], (entry["op"], p, fp.paths, fp.sessions)
                    checked += 1
            for s in SESSIONS:
                if s not in fp.sessions:
                    assert sessions[s] == before[1][s], (entry["op"], s, fp.sessions)
                    checked += 1
    assert checked > 2_000 and none > 50, (checked, none)    # both kinds were met often


def test_an_entry_by_whose_time_a_set_expires_has_no_footprint():
    chain, st = Chain(), State()
    for e, h, _sig in chain.rows:
        st.apply("demo", e, h)
    for s in ("s1", "s2"):
        st.apply("demo", chain.start(s), chain.rows[-1][1])
    assert footprint.apply(st, "demo", chain.acquire("s1", "x", ["a.py#f"], ttl_ms=1_000), chain.rows[-1][1]) is not None
    chain.clock.step(2_000)     # s1's set on a.py runs out at s2's heartbeat: it may drop it
    assert footprint.apply(st, "demo", chain.beat("s2"), chain.rows[-1][1]) is None
    assert not st.repos["demo"].index.on_path(split("a.py#f")[0])
