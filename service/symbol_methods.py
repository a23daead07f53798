"""symbols: the symbol table of one file at a commit (trunk by default), for `lonca mcp`'s
`symbols` tool and the Lonis provider: the ids an agent leases are taken from here, never built."""
import asyncio

import pygit2

from lonca.protocol import LoncaError

from . import gitstore
from .methods import Call, method


def symbol_json(s) -> dict:
    return {"id": s.id, "kind": s.kind, "name": s.name, "qualified": s.qualified, "parent": s.parent,
            "start_line": s.start_line, "end_line": s.end_line, "test": s.test}


@method("symbols", "read")
async def symbols(call: Call) -> dict:
    p = call.params
    rs = call.repo_state()
    path = p["path"]
    commit = p.get("commit") or rs.trunk
    store = call.daemon.store(rs.name)

    def entry() -> pygit2.Object:
        obj = gitstore.commit_of(store, commit)
        try:
            found = obj.tree[path]
        except KeyError:
            raise LoncaError("not_found", f"{path} is not in commit {commit}") from None
        if found.type_str != "blob":
            raise LoncaError("not_found", f"{path} is not a file in commit {commit}")
        return found

    blob = await asyncio.to_thread(entry)
    table = await asyncio.to_thread(call.daemon.symbols.table, path, str(blob.id), lambda: store[blob.id].data)
    return {"path": path, "commit": commit, "language": table.language, "status": table.status,
            "symbols": [symbol_json(s) for s in table.symbols], "syntax_errors": table.syntax_errors}
