"""`lonca daemon` whose memory is sampled on its event loop every BENCH_SAMPLE_S (60) seconds, one
JSON line each to $BENCH_SAMPLE_OUT; any bench runs it when BENCH_SAMPLE_OUT is set (bench/worker.py),
e.g. `BENCH_SAMPLE_OUT=/tmp/s.jsonl BENCH_SOAK_SECONDS=300 python -m bench soak`.

A line holds what the soak's RSS was attributed with (docs/decisions.md, issue 17): /proc's RSS by
kind (anonymous, files) and smaps by mapping kind, glibc's heaps (mallinfo2 of the main arena,
malloc_info's per-arena totals), pymalloc's blocks, gc's objects by type (frozen ones included)
and their growth since the last line, and each container of each repository's state and of the
worker's caches with its length and deep size in KB. With BENCH_SAMPLE_TRACE=<frames>
tracemalloc runs from the start (the worker runs about 3x slower) and each line holds the
allocation sites that grew most since the line before (an object allocated before tracing
started would be invisible when freed, so tracing starts with the worker); with
BENCH_SAMPLE_PROBE_S, once past that many seconds, the chain of referrers of a few objects of each
site that grew (or of the sites BENCH_SAMPLE_PROBE_SITES lists, "service/paths.py:187,..."), which
names what keeps them. BENCH_SAMPLE_TREE_MB sets the symbol cache's bound on parse trees (its
default: symbols/cache.py DEFAULT_TREE_BYTES)."""
import asyncio
import collections
import ctypes
import gc
import json
import os
import re
import sys
import tempfile
import threading
import time
import tracemalloc
import types

from lonca.service import config as service_config
from lonca.service.daemon import serve

OUT = os.environ.get("BENCH_SAMPLE_OUT", "")
SAMPLE_S = float(os.environ.get("BENCH_SAMPLE_S", "60"))
TRACE_FRAMES = int(os.environ.get("BENCH_SAMPLE_TRACE", "0"))
PROBE_S = float(os.environ.get("BENCH_SAMPLE_PROBE_S", "0"))
CENSUS = bool(os.environ.get("BENCH_SAMPLE_CENSUS"))
HOLDERS = bool(os.environ.get("BENCH_SAMPLE_HOLDERS"))
DUMP_DIR = os.environ.get("BENCH_SAMPLE_DUMP", "")   # each traced snapshot also dumped there, to compare offline
_libc = ctypes.CDLL(None)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


_libc.mallinfo2.restype = _MallInfo2
_libc.open_memstream.restype = ctypes.c_void_p
_libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
_libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.fclose.argtypes = [ctypes.c_void_p]


def c_heaps() -> dict:
    """glibc's main arena (mallinfo2) and every arena's size from the system (malloc_info), MB."""
    buf, size = ctypes.c_char_p(), ctypes.c_size_t()
    f = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    _libc.malloc_info(0, f)
    _libc.fclose(f)
    xml = (buf.value or b"").decode()
    heaps = re.findall(r'<heap nr="\d+">.*?<system type="current" size="(\d+)"/>', xml, re.S)
    mi = _libc.mallinfo2()
    return {"main_arena_mb": mi.arena >> 20, "main_used_mb": mi.uordblks >> 20, "main_free_mb": mi.fordblks >> 20,
            "arenas_mb": [round(int(s) / 2**20, 1) for s in heaps]}


def pymalloc() -> dict:
    """pymalloc's arenas against the blocks in them, MB: arenas held but half empty are RSS that
    no object count shows (sys._debugmallocstats prints to the C stderr, read here from a file)."""
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()
    got = {k.strip(): int(v.replace(",", "")) for k, v in re.findall(r"^# ([a-z ]+?)\s*=\s*([\d,]+)$", text, re.M)}
    return {"arenas": got.get("arenas allocated current", 0), "arenas_total": got.get("arenas allocated total", 0),
            "used_mb": round(got.get("bytes in allocated blocks", 0) / 2**20, 1),
            "free_blocks_mb": round(got.get("bytes in available blocks", 0) / 2**20, 1)}


def proc_status() -> dict:
    out = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile"):
            out[k + "_mb"] = int(v.split()[0]) // 1024
    return out


def smaps() -> dict:
    """RSS in MB by mapping: packs, shared libraries, other files by name, [heap], anonymous."""
    out: collections.Counter = collections.Counter()
    name = ""
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if not parts[0].endswith(":"):
            path = parts[5] if len(parts) > 5 else ""
            base = path.rsplit("/", 1)[-1]
            name = ("pack" if base.endswith((".pack", ".idx")) else "libraries" if ".so" in base else base) \
                if path.startswith("/") else path or "anonymous"
        elif parts[0] == "Rss:":
            out[name] += int(parts[1])
    return {k: v // 1024 for k, v in out.most_common(8) if v >= 1024}


def deep_kb(obj, seen: set[int]) -> int:
    """The sizes of `obj` and what it holds (containers, __dict__, slots) not in `seen`, in KB."""
    total, todo = 0, [obj]
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            todo += o.keys()
            todo += o.values()
        elif isinstance(o, (list, tuple, set, frozenset, collections.deque)):
            todo += o
        else:
            todo += _fields(o).values()
    return total // 1024


def _fields(o) -> dict:
    found = dict(getattr(o, "__dict__", {}))
    for cls in type(o).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if s != "__dict__" and hasattr(o, s):
                found[s] = getattr(o, s)
    return found


def containers(d) -> dict:
    """name -> [length, deep KB] of each container of the state and of the worker's caches."""
    out = {}
    for repo, rs in d.state.repos.items():
        for prefix, obj in ((f"{repo}.", rs), (f"{repo}.settled.", rs.settled), (f"{repo}.trunks.", rs.trunks)):
            for f, v in _fields(obj).items():
                if isinstance(v, (dict, list, set, collections.deque)):
                    out[prefix + f] = [len(v), deep_kb(v, set())]
    for name in ("told", "hooks", "rate", "tree_maps", "manifests", "symbols", "warmer", "queue", "server", "running"):
        obj = getattr(d, name, None)
        for f, v in ({name: obj} if isinstance(obj, dict) else _fields(obj)).items():
            if isinstance(v, (dict, list, set, collections.deque)) and v:
                out[f"d.{name}.{f}" if f != name else f"d.{name}"] = [len(v), None]
    out["d.symbols.bytes_mb"] = [d.symbols._bytes >> 20, d.symbols._tree_bytes >> 20]   # estimates against their bounds
    return out


def holders(d) -> dict:
    """name -> deep MB of each holder of the worker's memory, measured in this order with one
    `seen`, so what two hold (a table in the symbol cache and in a base's index) counts for the
    first: the state's sessions' events, the tree maps and blob sizes, the tree answers, the
    symbol cache's tables, its bases' indexes, its kept trees (their sources; a tree's C nodes
    are not Python objects: symbols/cache.py's estimate stands beside), the warmer, the rest of
    the state, the log writer's and the queue's containers. BENCH_SAMPLE_HOLDERS=1 (a walk of every table:
    seconds a sample)."""
    seen: set[int] = {id(d), id(asyncio.get_running_loop())}   # what every holder can reach
    out: dict = {}

    def put(name, obj):
        try:
            out[name] = round(deep_kb(obj, seen) / 1024, 1)
        except Exception as e:  # noqa: BLE001 - one holder lost, the others kept
            out[name] = repr(e)[:100]
    for repo, rs in d.state.repos.items():
        put(f"{repo}.events", rs.events)
    put("tree_maps.maps", d.tree_maps._maps)
    put("tree_maps.sizes", d.tree_maps._sizes)
    out["tree_maps.counts"] = [len(d.tree_maps._maps), len(d.tree_maps._sizes)]
    put("manifests", d.manifests._held)
    put("symbols.tables", d.symbols._blobs)
    put("symbols.bases", d.symbols._bases)
    put("symbols.trees_source", d.symbols._trees)
    out["symbols.counts"] = [len(d.symbols._blobs), len(d.symbols._bases), len(d.symbols._trees)]
    put("warmer", [d.warmer._wanted, d.warmer._last])
    put("state", [d.state.repos, d.state.nonces, d.state.sign_counts])
    log = d.log     # its containers only: the engine's objects do not bear being walked
    put("log", [log._pending, log._quick, log._in_flight, log._witness_owed, log.durable_next])
    put("queue", [v for v in vars(d.queue).values() if isinstance(v, (dict, set, list))])
    put("told_hooks_rate_running", [d.told, d.hooks, d.rate, d.running])
    from lonca.symbols import languages, mentions

    from lonca.service import globs
    out["lru"] = {"language_of": languages.language_of.cache_info().currsize,
                  "mentions": [f.cache_info().currsize for f in vars(mentions).values() if hasattr(f, "cache_info")],
                  "globs": [f.cache_info().currsize for f in vars(globs).values() if hasattr(f, "cache_info")]}
    return out


def _site(frame) -> str:
    return "/".join(frame.filename.split("/")[-2:]) + f":{frame.lineno}"


def _describe(o) -> str:
    if isinstance(o, dict):
        return f"dict[{len(o)}] keys {list(o)[:4]!r}"[:200]
    if isinstance(o, (list, tuple, set, frozenset)):
        return f"{type(o).__name__}[{len(o)}] {repr(list(o)[:3])[:150]}"
    return f"{type(o).__name__} {repr(o)[:150]}"


def referrers(sites: list[str], per_site: int = 2, depth: int = 8) -> list[dict]:
    """For a few objects allocated at each of `sites`, who refers to them, up `depth` steps."""
    gc.unfreeze()   # get_objects and get_referrers see no frozen object
    try:
        found: dict[str, list] = {site: [] for site in sites}
        objects_full = [None] * per_site    # a site not asked about counts as full
        for o in gc.get_objects():
            tb = tracemalloc.get_object_traceback(o)
            if tb is not None and len(found.get(key := _site(tb[-1]), objects_full)) < per_site:
                found[key].append(o)
        out = []
        for site, objects in found.items():
            for o in objects:
                chain, cur, skip = [], o, {id(found), id(objects), id(sys._getframe())}
                for _ in range(depth):
                    refs = [r for r in gc.get_referrers(cur) if id(r) not in skip and not isinstance(r, types.FrameType)]
                    if not refs:
                        break
                    skip.update((id(cur), id(refs)))    # this list refers to the next one too
                    cur = refs[0]
                    chain.append(_describe(cur) + (f" (and {len(refs) - 1} more)" if len(refs) > 1 else ""))
                out.append({"site": site, "object": _describe(o), "held_by": chain})
        return out
    finally:
        gc.freeze()


def untracked_by_holder() -> tuple[dict[int, int], int]:
    """Bytes of the objects gc does not track (str, int, bytes, tuples and dicts of atoms) by the
    tracked object that holds them (its id), and the bytes of every object gc can reach: what
    pymalloc holds beyond that is held from C only (a cache of an extension, interned strings)."""
    gc.unfreeze()
    try:
        seen: set[int] = set()
        held: dict[int, int] = {}
        reached = 0
        for o in gc.get_objects():
            reached += sys.getsizeof(o)
            n, todo = 0, [r for r in gc.get_referents(o) if not gc.is_tracked(r)]
            while todo:
                r = todo.pop()
                if id(r) in seen or isinstance(r, type):
                    continue
                seen.add(id(r))
                n += sys.getsizeof(r)
                if isinstance(r, (tuple, dict)):
                    todo += [x for x in gc.get_referents(r) if not gc.is_tracked(x)]
            if n:
                held[id(o)] = n
            reached += n
        return held, reached
    finally:
        gc.freeze()


def holders_grown(before: dict[int, int], now: dict[int, int], top: int = 12) -> list[dict]:
    """The tracked holders whose untracked objects grew most since `before`, each with who holds it."""
    grown = sorted(((n - before.get(i, 0), i) for i, n in now.items()), reverse=True)[:top]
    by_id = {i: None for _, i in grown}
    gc.unfreeze()
    try:
        for o in gc.get_objects():
            if id(o) in by_id:
                by_id[id(o)] = o
        out = []
        for kb, i in grown:
            o = by_id[i]
            if o is None:
                continue
            chain, cur, skip = [], o, {id(by_id), id(sys._getframe())}
            for _ in range(6):
                refs = [r for r in gc.get_referrers(cur) if id(r) not in skip and not isinstance(r, types.FrameType)]
                if not refs:
                    break
                skip.update((id(cur), id(refs)))
                cur = refs[0]
                chain.append(_describe(cur) + (f" (and {len(refs) - 1} more)" if len(refs) > 1 else ""))
            out.append({"grew_kb": kb // 1024, "now_kb": now[i] // 1024, "holder": _describe(o), "held_by": chain})
        del by_id
        return out
    finally:
        gc.freeze()


class Sampler:
    def __init__(self) -> None:
        self.t0 = time.time()
        self.counts: collections.Counter | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        self.probed = False
        self.held: dict[int, int] | None = None

    def ready(self, daemon) -> None:
        self.daemon = daemon
        if TRACE_FRAMES:
            tracemalloc.start(TRACE_FRAMES)
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._tick, args=(loop,), name="bench-sampler", daemon=True).start()

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            time.sleep(SAMPLE_S)
            done = threading.Event()
            loop.call_soon_threadsafe(self._sample, done)  # on the loop: the state is not moving
            done.wait()

    def _sample(self, done: threading.Event) -> None:
        try:
            t = time.time() - self.t0
            line: dict = {"t": round(t), **proc_status(), **c_heaps(), "smaps": smaps(), "pyblocks": sys.getallocatedblocks(),
                        "pymalloc": pymalloc()}
            for repo, rs in self.daemon.state.repos.items():
                line[repo] = {"next_seq": rs.next_seq, "integrations": rs.integrations}
            line["containers"] = containers(self.daemon)
            if HOLDERS:
                line["holders"] = holders(self.daemon)
            gc.unfreeze()
            counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
            gc.freeze()
            if self.counts is not None:
                grew = {k: n - self.counts.get(k, 0) for k, n in counts.items()}
                line["gc_growth"] = sorted(((n, k) for k, n in grew.items() if n), reverse=True)[:15]
            self.counts = counts
            if CENSUS:
                held, reached = untracked_by_holder()
                line["census"] = {"reached_mb": round(reached / 2**20, 1), "untracked_mb": round(sum(held.values()) / 2**20, 1)}
                if self.held is not None:
                    line["census"]["grown"] = holders_grown(self.held, held)
                self.held = held
            if TRACE_FRAMES:
                snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
                if self.snapshot is not None:
                    stats = snap.compare_to(self.snapshot, "traceback")
                    line["traced_growth_kb"] = sum(s.size_diff for s in stats) // 1024
                    line["traced_sites"] = [{"kb": s.size_diff // 1024, "count": s.count_diff,
                                             "traceback": [_site(f) for f in s.traceback]} for s in stats[:25]]
                    if PROBE_S and t >= PROBE_S and not self.probed:
                        self.probed = True
                        named = [x for x in os.environ.get("BENCH_SAMPLE_PROBE_SITES", "").split(",") if x]
                        line["held_by"] = referrers(named or [s["traceback"][-1] for s in line["traced_sites"] if s["kb"] > 0][:8])
                self.snapshot = snap
                if DUMP_DIR:
                    snap.dump(os.path.join(DUMP_DIR, f"snap-{round(t):05d}.pickle"))
            with open(OUT, "a") as f:
                f.write(json.dumps(line) + "\n")
        except Exception as e:  # noqa: BLE001 - a sample lost is a line that says why
            with open(OUT, "a") as f:
                f.write(json.dumps({"error": repr(e)}) + "\n")
        finally:
            done.set()


if __name__ == "__main__":
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.environ.get("BENCH_SAMPLE_TREE_MB"):  # the symbol cache's tree bound, to see whether RSS levels with it
        import functools

        from lonca.service import daemon
        daemon.SymbolCache = functools.partial(daemon.SymbolCache, tree_bytes=int(os.environ["BENCH_SAMPLE_TREE_MB"]) << 20)  # type: ignore[misc]
    asyncio.run(serve(service_config.from_env(), Sampler().ready))
