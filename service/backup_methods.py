"""repo.backup and repo.restore (seed 001): a repository as one Git bundle, log included, and the
repository made again from one.

The log travels inside git: `refs/lonca/log` names a commit whose tree holds `log.jsonl`, the
export format of `lonca log --json` (one {"entry", "hash", "sig"} a line), so a bundle, a bare
store or a remote carries the log with the trees it names. A bundle holds every ref and also the
commits the log names that no ref reaches (a proposal's commit lives in the log, not under refs/,
and a policy commit lives off trunk): it is written with pygit2's PackBuilder, header and pack as
git's bundle format v2 lays them out, so `git fetch <bundle>` reads it. A restore verifies the
whole log offline (lonca.audit, the verifier of `lonca audit verify`) before anything is kept.
A log on a daemon key this worker does not hold is kept too, marked foreign (seed: it waits for
daemon.recover, service/key_methods.py)."""
import asyncio
import json
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

import pygit2
from sqlalchemy import insert as insert_into
from sqlalchemy.engine import Engine
from sqlmodel import Session

from lonca.audit import verify_entries, write_witness
from lonca.canonical import canonical
from lonca.protocol import LoncaError

from . import gitstore, remotes, settled_store, trunk_store
from .methods import Call, method
from .read_methods import on_store
from .state import State
from .store import LogRow, read_log

LOG_REF = "refs/lonca/log"
LOG_FILE = "log.jsonl"
_GIT_ID = re.compile(r"[0-9a-f]{40}")
_LINE = re.compile(r'\{"entry":(\{.*\}),"hash":"([0-9a-f]{64})","sig":"([0-9a-f]+)"\}')
_SIG = ("Lonca", "daemon@lonca.invalid")


def named_ids(value) -> set[str]:
    """Every git id an operation names (commit, base, policy, trunk, merged, found …)."""
    if isinstance(value, str):
        return {value} if _GIT_ID.fullmatch(value) else set()
    if isinstance(value, dict):
        return set().union(*(named_ids(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(named_ids(v) for v in value)) if value else set()
    return set()


def write_bundle(store: pygit2.Repository, path: Path, refs: dict[str, str], extra: set[str]) -> None:
    """A v2 bundle at `path` of `refs` (name -> id) with everything they and `extra` reach;
    written beside it and renamed into place, so a reader never sees half of one."""
    builder = pygit2.PackBuilder(store)
    walker = None  # add_recur takes a commit's tree, not its parents: the history comes from a walk
    for oid in sorted(set(refs.values()) | {e for e in extra if e in store}):
        obj = store[oid]
        if isinstance(obj, pygit2.Commit):
            if walker is None:
                walker = store.walk(obj.id, pygit2.enums.SortMode.NONE)
            else:
                walker.push(obj.id)
        else:
            builder.add_recur(obj.id)
    for commit in walker or ():
        builder.add_recur(commit.id)
    with tempfile.TemporaryDirectory(prefix="lonca-backup-", dir=path.parent) as tmp:
        builder.write(tmp)
        [pack] = Path(tmp).glob("pack-*.pack")
        partial = Path(tmp) / "bundle"
        with open(partial, "wb") as out:
            out.write(b"# v2 git bundle\n")
            out.write("".join(f"{oid} {name}\n" for name, oid in sorted(refs.items())).encode() + b"\n")
            with open(pack, "rb") as src:
                shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)


def log_commit(store: pygit2.Repository, engine: Engine, name: str, seq: int, now_ms: int) -> list[LogRow]:
    """Point refs/lonca/log at a commit of the log up to `seq` (its parent: the one it named
    before, so pushes of it fast-forward); the rows written."""
    rows = read_log(engine, name, 1, seq)
    # the entry's text as it is stored (canonical: what its hash covers), not parsed again
    text = "".join(f'{{"entry":{r.entry},"hash":"{r.hash}","sig":"{r.sig}"}}\n' for r in rows)
    tb = store.TreeBuilder()
    tb.insert(LOG_FILE, store.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature(*_SIG, now_ms // 1000, 0)
    parents = [store.references[LOG_REF].target] if LOG_REF in store.references else []
    store.create_commit(LOG_REF, sig, sig, f"Lonca log of {name} to seq {seq}\n", tb.write(), parents)
    return rows


@method("repo.backup", "human")
async def backup(call: Call) -> dict:
    d, rs = call.ctx, call.repo_state()
    name, seq, head, key = rs.name, rs.next_seq - 1, rs.head_hash, rs.daemon_key
    await d.log.wait_for(name, seq, 30)  # the entries up to here are in the database
    d.config.backups_dir.mkdir(mode=0o700, exist_ok=True)
    path = d.config.backups_dir / f"{name}-{seq}.bundle"

    def work(store: pygit2.Repository) -> None:
        rows = log_commit(store, d.engine, name, seq, d.now_ms())
        extra = set().union(*(named_ids(json.loads(r.entry)["op"]) for r in rows))
        refs = {r: str(store.references[r].resolve().target) for r in store.references
                if r.startswith("refs/") and not r.startswith("refs/lonca/fetch/")}
        write_bundle(store, path, refs, extra)
    await on_store(call, work)
    return {"repo": name, "path": str(path), "seq": seq, "head_hash": head, "daemon_key": key}


def _read_log(store: Path) -> list[tuple[str, str, str]]:
    """(canonical entry, hash, sig) of each line of the log the store's refs/lonca/log holds."""
    repo = pygit2.Repository(str(store))
    try:
        blob = repo[repo.references[LOG_REF].peel(pygit2.Commit).tree[LOG_FILE].id]
    except (KeyError, ValueError, pygit2.GitError):
        raise LoncaError("invalid", f"no log: the source has no {LOG_REF} holding {LOG_FILE} (make one with "
                                    "repo.backup, `lonca backup`)") from None
    rows = []
    for n, line in enumerate(blob.data.decode("utf-8").splitlines(), 1):
        if m := _LINE.fullmatch(line):  # as repo.backup writes it: the entry's text is the hashed one
            rows.append((m[1], m[2], m[3]))
            continue
        try:  # any other spelling of the export format
            item = json.loads(line)
            rows.append((canonical(item["entry"]).decode("utf-8"), item["hash"], item["sig"]))
        except (ValueError, KeyError, TypeError):
            raise LoncaError("integrity", f"line {n} of the log is not an {{entry, hash, sig}} object") from None
    return rows


def _log_key(rows: list[tuple[str, str, str]]) -> str:
    """The daemon key the log's last entries are signed with: repo.init's, or the last allowed
    daemon.rotate's or daemon.recover's (the audit verified the chain of keys)."""
    key = json.loads(rows[0][0])["op"]["daemon_key"]
    for text, _hash, _sig in rows:
        if '"daemon.r' in text:   # a cheap filter before parsing: 100 000 entries
            entry = json.loads(text)
            if entry["op"].get("op") in ("daemon.rotate", "daemon.recover") and entry["decision"].get("outcome") == "allow":
                key = entry["op"]["key"]
    return key


@method("repo.restore", "bootstrap")
async def restore(call: Call) -> dict:
    d = call.ctx
    name, source = call.params["repo"], call.params["from"]
    if d.state.repo(name):
        raise LoncaError("conflict", f"the repository {name} exists")
    from_copy = remotes.check_remote(d.config, source, "from", backups=True)
    staging = d.config.repos_dir / ".staging" / secrets.token_hex(8)
    staging.parent.mkdir(parents=True, exist_ok=True)

    def fetch() -> list[tuple[str, str, str]]:
        gitstore.init_store(staging)
        remotes.fetch_every_ref(staging, source, from_copy)
        return _read_log(staging)
    try:
        rows = await asyncio.to_thread(fetch)
        if not rows:
            raise LoncaError("invalid", "no log: the source's log is empty")
        first = json.loads(rows[0][0])["op"]
        if first.get("op") != "repo.init" or first.get("repo") != name:
            raise LoncaError("invalid", f"this is a backup of {first.get('repo')!r}, not of {name!r}: a log signs its "
                                        "repository's name, so restore it under that name")
        count, problem = await asyncio.to_thread(verify_entries, name, rows)
        if problem:
            raise LoncaError("integrity", f"the log does not verify at {problem}; nothing was restored")
        key = _log_key(rows)
        target = d.config.store_path(name)
        if d.state.repo(name) or target.exists():
            raise LoncaError("conflict", f"the repository {name} exists")
        shutil.move(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    def replay() -> tuple[State, list[dict], list[dict]]:
        st = State(d.state.policy_of, d.state.settled_reader, d.state.trunk_reader)
        for text, hash_hex, _ in rows:
            st.apply(name, json.loads(text), hash_hex)
        # what it settled and made trunk goes in with its log
        return st, settled_store.pending_rows(st.repos.values()), trunk_store.pending_rows(st.repos.values())
    st, settled, trunks = await asyncio.to_thread(replay)

    def insert() -> None:
        with Session(d.engine) as s:  # one executemany, as the log writer's commit does
            s.execute(insert_into(LogRow), [{"repo": name, "seq": n, "entry": t, "hash": h, "sig": g}
                                            for n, (t, h, g) in enumerate(rows, 1)])
            settled_store.write(s.connection(), settled)
            trunk_store.write(s.connection(), trunks)
            s.commit()
    await d.log.on_db(insert)
    settled_store.mark_written(st.repos.values(), settled)
    trunk_store.mark_written(st.repos.values(), trunks)
    if d.state.repo(name):  # a repo.init of the same name won the race while this one was written
        raise LoncaError("conflict", f"the repository {name} exists")
    d.state.repos[name] = st.repos[name]
    d.state.nonces.update(st.nonces)
    for k, v in st.sign_counts.items():
        d.state.sign_counts[k] = max(v, d.state.sign_counts.get(k, 0))
    d.log.durable_next[name] = st.repos[name].next_seq
    seq, head, sig = count, rows[-1][1], rows[-1][2]
    write_witness(d.config.witness_dir, name, seq, head, sig)
    # on another daemon's key, the repository is foreign: read, never written, until one of its
    # humans signs a daemon.recover to this daemon's key (key_methods.decide_daemon_recover)
    return {"repo": name, "seq": seq, "head_hash": head, "daemon_key": key, "foreign": not d.keys.holds(key),
            "path": str(d.config.store_path(name))}
