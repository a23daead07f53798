"""symbols: the symbol table of one file at a commit (trunk by default), for `lonca mcp`'s
`symbols` tool and the Lonis provider: the ids an agent leases are taken from here, never built."""
import pygit2

from lonca.protocol import LoncaError

from . import gitstore
from .lease_model import FILE, covers, split
from .methods import Call, method
from .read_methods import on_store


def symbol_json(s) -> dict:
    return {"id": s.id, "kind": s.kind, "name": s.name, "qualified": s.qualified, "parent": s.parent,
            "start_line": s.start_line, "end_line": s.end_line, "test": s.test}


@method("symbols", "read")
async def symbols(call: Call) -> dict:
    p = call.params
    rs = call.repo_state()
    path = p["path"]
    commit = p.get("commit") or rs.trunk

    def read(store: pygit2.Repository):
        obj = gitstore.commit_of(store, commit)
        try:
            found = obj.tree[path]
        except KeyError:
            raise LoncaError("not_found", f"{path} is not in commit {commit}") from None
        if found.type_str != "blob":
            raise LoncaError("not_found", f"{path} is not a file in commit {commit}")
        return call.ctx.symbols.table(path, str(found.id), lambda: store[found.id].data)

    table = await on_store(call, read)
    return {"path": path, "commit": commit, "language": table.language, "status": table.status,
            "symbols": [symbol_json(s) for s in table.symbols], "syntax_errors": table.syntax_errors}


async def lease_warnings(call: Call, items: list[dict]) -> list[str]:
    """What a lease names that trunk does not have: granted all the same (the seed names no
    denial for it, and an edit lease on a new file's path#<file> must be granted), but said, so an
    agent does not hold a lease that covers nothing (docs/decisions.md, "Leases on symbols trunk
    does not have")."""
    rs = call.repo_state()
    wanted = [(it, *split(it["symbol"])) for it in items]
    trunk = rs.trunk    # read on the loop: the thread reads no live state
    if not trunk:
        return []

    def tables(store: pygit2.Repository) -> dict:
        tree = gitstore.commit_of(store, trunk).tree
        out = {}
        for path in {p for _, p, _ in wanted}:
            try:
                found = tree[path]
            except (KeyError, ValueError, TypeError):   # no such file, or a path git cannot look up
                found = None
            out[path] = None if found is None or found.type_str != "blob" else \
                call.ctx.symbols.table(path, str(found.id), lambda f=found: store[f.id].data)
        return out

    by_path = await on_store(call, tables)
    warnings = []
    for it, path, qual in wanted:
        table, sym, hint = by_path[path], it["symbol"], f"take ids from `lonca symbols {path}`"
        if table is None:
            if not (qual == FILE and it["kind"] in ("edit", "rename")):
                warnings.append(f"{sym}: {path} is not a file on trunk; a file a change adds needs an edit "
                                f"lease on {path}#{FILE}")
        elif table.status == "parsed" and not any(covers(sym, s.id) for s in table.symbols):
            what = "no container" if it["kind"] == "insert" else "no symbol"
            warnings.append(f"{sym}: trunk has {what} of that name, so this {it['kind']} lease covers nothing "
                            f"there; {hint} (to add a symbol, take an insert lease on its container)")
    return warnings
