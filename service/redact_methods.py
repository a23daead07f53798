"""redact (seed 001, "The key lifecycle"): a human's signed operation that takes a blob out of
every answer. The blob id joins the repository's redacted set (state, replayed from the log and
carried by checkpoints); tree and blobs serve its contents as null, change.diff leaves its files
out and lists them, change.get's evidence answers a redacted log as null, and trunk.bundle refuses
with `redacted`. The object stays in the store: git ids, trunk's history and the log's own refs
name it (docs/decisions.md, "redact: served as null, kept in the store"). This module adds the
kind to human.submit's tables when the worker loads it."""
import pygit2

from lonca.protocol import LoncaError

from .human_methods import SUBMIT_AROUND, SUBMIT_OPS, Append
from .key_methods import check_reason
from .log import Draft, allow
from .methods import Call
from .read_methods import on_store
from .state import RepoState


def _check_blob(store: pygit2.Repository, blob: str) -> None:
    """not_found for an object the store does not hold, invalid for one that is not a blob (a
    commit or a tree is redacted file by file). The header only: the contents are not read."""
    try:
        kind, _size = store.odb.read_header(blob)
    except KeyError:
        raise LoncaError("not_found", f"no blob {blob} in this repository's store") from None
    if kind != pygit2.GIT_OBJECT_BLOB:
        raise LoncaError("invalid", f"{blob} is not a blob: redact names a file's blob id (tree answers them)")


async def submit_redact(call: Call, rs: RepoState, op: dict, append: Append) -> dict:
    """The blob is looked up off the loop (a store handle is never taken on it), then decided."""
    check_reason(op)
    await on_store(call, _check_blob, op["blob"])
    return await append()


def decide_redact(call: Call, rs: RepoState, op: dict) -> Draft:
    check_reason(op)
    if op["blob"] in rs.redacted:
        raise LoncaError("invalid", f"{op['blob']} is redacted already in {rs.name}")
    return Draft(actor=call.auth.actor, op=op, decision=allow(), result=lambda e: {"blob": op["blob"]})


SUBMIT_OPS["redact"] = decide_redact
SUBMIT_AROUND["redact"] = submit_redact
