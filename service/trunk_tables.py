"""Trunk's symbol tables of the files a lease request names, read once before the log's turn:
what trunk defines in an insert's containers, how its sections nest, and what a lease names that
trunk does not have (docs/decisions.md, "Leases on symbols trunk does not have").

A file whose blob a human redacted has the opaque table (one whole file, no names): a lease's
warnings and an insert's names must not tell what it defines.

The tables come from memory when trunk's tree map and those tables are held (the warmer holds
them: no thread hop, no git), else from one worker thread with its own git handle, which may
parse. A lease.acquire resolved trunk three times on three threads before (bench leases)."""
import pygit2

from lonca.symbols import SymbolCache
from lonca.symbols.languages import SECTION_LANGUAGES, language_of
from lonca.symbols.table import FileSymbols, opaque_file

from .change_build import TreeMaps
from .lease_model import FILE, covers, split
from .methods import Call
from .read_methods import on_store

Tables = dict[str, FileSymbols | None]  # path -> its table at trunk, None when no file there
SUBMODULE = "160000"


async def read(call: Call, paths: list[str]) -> Tables:
    """The tables at trunk of `paths`; {} when the repository has no trunk."""
    rs = call.repo_state()
    trunk, redacted = rs.trunk, frozenset(rs.redacted)     # read on the loop: the thread reads no live state
    if not trunk or not paths:
        return {}
    d = call.ctx
    held = _held(d.tree_maps, d.symbols, trunk, paths, redacted)
    if held is not None:
        return held
    return await on_store(call, _read_on_thread, d.tree_maps, d.symbols, trunk, paths, redacted)


def _held(maps: TreeMaps, symbols: SymbolCache, trunk: str, paths: list[str], redacted: frozenset[str]) -> Tables | None:
    """The tables from memory, None unless every one is held (or a thread holds a lock: the
    loop does not wait for it)."""
    files = maps.held(trunk, wait=False)
    if files is None:
        return None
    out: Tables = {}
    wanted = []
    for path in paths:
        e = files.get(path)
        if e is None or e.mode == SUBMODULE:
            out[path] = None
        elif e.oid in redacted:
            out[path] = opaque_file(path, language_of(path))
        else:
            wanted.append((path, e.oid))
    found = symbols.held(wanted, wait=False)
    if found is None or None in found:
        return None
    out.update((path, table) for (path, _), table in zip(wanted, found))
    return out


def _read_on_thread(store: pygit2.Repository, maps: TreeMaps, symbols: SymbolCache, trunk: str, paths: list[str],
                    redacted: frozenset[str]) -> Tables:
    """On a worker thread: trunk's map (from its parent's when that is held), then each table,
    read and parsed if need be; what it reads stays held for the next request."""
    files = maps.get(store, trunk)
    out: Tables = {}
    for path in paths:
        e = files.get(path)
        out[path] = None if e is None or e.mode == SUBMODULE else opaque_file(path, language_of(path)) \
            if e.oid in redacted else symbols.table(path, e.oid, lambda oid=e.oid: store[oid].data)
    return out


def defined_names(tables: Tables, items: list[dict]) -> set[tuple[str, str]]:
    """(container, name) of what trunk defines in the files of `items` that insert with names."""
    paths = {split(it["symbol"])[0] for it in items if it["kind"] == "insert" and it.get("names")}
    return {(s.container, s.name) for p in paths if (t := tables.get(p)) is not None
            for s in t.symbols if s.kind not in ("file", "def")}


def section_paths(items: list[dict]) -> list[str]:
    """The files of `items` whose names may hold dots (section languages)."""
    return sorted({p for p in (split(it["symbol"])[0] for it in items) if language_of(p) in SECTION_LANGUAGES})


def nesting(tables: Tables, items: list[dict]) -> dict[str, str]:
    """id -> container id at trunk in the section files of `items`: what a lease on
    `R.md#Release 1` covers (lease_model.covers). Empty for code."""
    return {s.id: s.container for p in section_paths(items) if (t := tables.get(p)) is not None
            for s in t.symbols if s.kind != "file"}


def warnings(tables: Tables, items: list[dict]) -> list[str]:
    """What a lease names that trunk does not have: granted all the same (the seed names no
    denial for it, and an edit lease on a new file's path#<file> must be granted), but said, so an
    agent does not hold a lease that covers nothing. Nothing without a trunk."""
    out = []
    for it in items:
        sym = it["symbol"]
        path, qual = split(sym)
        if path not in tables:
            continue
        table, hint = tables[path], f"take ids from `lonca symbols {path}`"
        if table is None:
            if not (qual == FILE and it["kind"] in ("edit", "rename")):
                out.append(f"{sym}: {path} is not a file on trunk; a file a change adds needs an edit "
                           f"lease on {path}#{FILE}")
        elif table.status == "parsed" and not any(covers(sym, s.id) for s in table.symbols):
            what = "no container" if it["kind"] == "insert" else "no symbol"
            out.append(f"{sym}: trunk has {what} of that name, so this {it['kind']} lease covers nothing "
                       f"there; {hint} (to add a symbol, take an insert lease on its container)")
    return out
