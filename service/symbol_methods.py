"""symbols: the symbol table of one file at a commit (trunk by default), for `lonca mcp`'s
`symbols` tool and the Lonis provider: the ids an agent leases are taken from here, never built.
A redacted blob has no table here: names and lines are read from its contents, which every read
serves as null (docs/decisions.md, "Reads derived from a redacted blob's contents")."""
import pygit2

from lonca.protocol import LoncaError
from lonca.symbols.languages import language_of

from . import gitstore
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
    redacted = frozenset(rs.redacted)  # read on the loop

    def read(store: pygit2.Repository):
        obj = gitstore.commit_of(store, commit)
        try:
            found = obj.tree[path]
        except KeyError:
            raise LoncaError("not_found", f"{path} is not in commit {commit}") from None
        if found.type_str != "blob":
            raise LoncaError("not_found", f"{path} is not a file in commit {commit}")
        if str(found.id) in redacted:
            return None
        return call.ctx.symbols.table(path, str(found.id), lambda: store[found.id].data)

    table = await on_store(call, read)
    if table is None:   # the path's whole-file id is all a lease can name; it holds no content
        return {"path": path, "commit": commit, "language": language_of(path), "status": "redacted",
                "symbols": [], "syntax_errors": []}
    return {"path": path, "commit": commit, "language": table.language, "status": table.status,
            "symbols": [symbol_json(s) for s in table.symbols], "syntax_errors": table.syntax_errors}
