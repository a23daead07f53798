"""Commands for people and operators: daemon, init, human login / whoami, status, log, audit
verify, doctor."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from lonca import humankeys, humansig, install, paths, security_key, sshsig
from lonca import workspace as wsp
from lonca.audit import landing_problems, read_witnesses, verify_entries, witness_problem
from lonca.database_errors import database_problem
from lonca.canonical import canonical
from lonca.client import Client, Unreachable, checked_ping
from lonca.output import OK, REFUSED, Usage, command, decision_exit, emit_json, paint
from lonca.protocol import LOGIN_TTL_DEFAULT_MS, LoncaError, actor_label, now_ms



def register(sub) -> None:
    dm = sub.add_parser("daemon", help="run the worker in the foreground")
    dm.set_defaults(run=cmd_daemon)
    dm.add_argument("--local-root", action="append", metavar="DIR",
                    help="a folder local remotes may be under (repeat it for more; default: anywhere outside the home)")
    dm.add_argument("--import-dir", metavar="DIR", help="a folder whose Git bundles imports may read (from a copy)")

    i = command(sub, "init", "create a repository (empty, or imported from a git branch)", cmd_init, human=True)
    i.add_argument("repo")
    i.add_argument("--import", dest="import_from", metavar="PATH")
    i.add_argument("--branch", help="the branch to import (default: the source's default branch)")
    i.add_argument("--profile", choices=["cooperative", "hardened"])
    i.add_argument("--without-presence", action="store_true",
                   help="hardened with a file key, which proves no presence (the profile says so)")

    h = sub.add_parser("human", help="your human key and session").add_subparsers(dest="human_cmd", metavar="COMMAND")
    command(h, "login", "open a human session with your key (the file key, or your security key)", cmd_login, repo=True) \
        .add_argument("--ttl-ms", type=int, default=LOGIN_TTL_DEFAULT_MS)
    command(h, "whoami", "your human name and public key (local)", cmd_whoami, human=True)
    k = command(h, "key", "make your file key if you have none, and print its public part to enrol", cmd_key, human=True)
    k.add_argument("--security-key", choices=sorted(security_key.KINDS), metavar="KIND",
                   help="make a FIDO security key instead (ed25519 or p256, one touch; ssh-keygen talks to the "
                        "device) and print its .pub line to enrol")
    en = command(h, "enrol", "enrol another key in a repository (signed with your key: the file key, or your security key)",
                 cmd_enrol, repo=True)
    en.add_argument("name", help="the name the key signs as")
    which = en.add_mutually_exclusive_group(required=True)
    which.add_argument("--public", help="a file key as `lonca human key` prints it (ed25519:<hex>), or a FIDO "
                                        "security key's .pub line made with -O application=ssh:lonca")
    which.add_argument("--as-in", metavar="REPO", help="the key NAME has in that repository (e.g. your passkey, "
                                                      "so the console shows a repository you made with the CLI)")
    from lonca import key_commands  # here: it builds on this module's helpers
    key_commands.register(h)

    command(sub, "status", "a repository's state", cmd_status, repo=True)
    lg = command(sub, "log", "a repository's log entries", cmd_log, repo=True,
                 json_help="one {entry, hash, sig} per line (the export format)")
    lg.add_argument("--from", dest="start", type=int, default=1)
    lg.add_argument("--follow", action="store_true", help="keep waiting for new entries")

    a = sub.add_parser("audit", help="verify logs offline").add_subparsers(dest="audit_cmd", metavar="COMMAND")
    av = command(a, "verify", "check the chain, daemon and human signatures of a log, offline", cmd_audit_verify)
    av.add_argument("--repo", help="only this repository (default: every one in the database)")
    av.add_argument("--file", help="an exported log (lonca log --json) instead of the database")
    av.add_argument("--database", help="a database URL (default: LONCA_DATABASE_URL or $LONCA_HOME/lonca.db)")
    av.add_argument("--witness", help="the folder of the worker's log witnesses, which tell a log whose end was removed "
                                      "(default: $LONCA_HOME/witness when reading the database)")
    av.add_argument("--stores", help="the folder of the repositories' git stores (<repo>.git), where each integrated "
                                     "commit's tree is compared with the tree its checks passed on "
                                     "(default: $LONCA_HOME/repos when reading the database)")

    command(sub, "doctor", "check the daemon, its socket, git, your key and each repository's log", cmd_doctor,
            human=True)
    rn = command(sub, "runner", "run the merge queue's checks for workers whose policy says [queue] runner = "
                 '"celery" (broker: LONCA_CELERY_BROKER)', cmd_runner)
    rn.add_argument("--concurrency", type=int, default=1, help="jobs run at once (default 1)")


# -- the worker ------------------------------------------------------------------------------

def cmd_runner(args) -> int:
    """A check runner: a Celery worker of lonca.queue.celery_runner. It needs the broker and
    nothing of the worker's: no home, no database, no token, no key."""
    if args.concurrency < 1:
        raise Usage("--concurrency is at least 1")
    from lonca.queue.celery_runner import app
    app.worker_main(["worker", "--concurrency", str(args.concurrency), "--pool", "prefork", "--loglevel", "INFO",
                     "--without-gossip", "--without-mingle", "--hostname", f"lonca-runner-{os.getpid()}@%h"])
    return OK


def cmd_daemon(args) -> int:
    import asyncio
    import faulthandler
    import logging

    from lonca.service import config as service_config
    from lonca.service.daemon import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    faulthandler.enable()  # a crash in a native library leaves its trace in the worker's output
    cfg = service_config.from_env()
    if args.local_root:
        cfg.local_roots = tuple(Path(r).resolve() for r in args.local_root)
    if args.import_dir:
        cfg.import_dir = Path(args.import_dir).resolve()

    def ready(daemon):
        print(f"lonca daemon: listening on {cfg.socket}", flush=True)
        print(f"  home {cfg.home}; database {daemon.engine.url.render_as_string(hide_password=True)}", flush=True)
        print(f"  daemon key {daemon.keys.public}; {len(daemon.state.repos)} repositories", flush=True)
        print(f"  mode {cfg.mode}", flush=True)

    try:
        asyncio.run(serve(cfg, ready))
    except LoncaError as e:
        print(f"{e.code}: {e.message}", file=sys.stderr)
        return REFUSED
    return OK


# -- humans ----------------------------------------------------------------------------------

def human_name(args) -> str:
    return getattr(args, "human", None) or humankeys.default_human()


def need_key(name: str) -> humankeys.Signer:
    key = humankeys.load_signer(name)
    if key is None:
        raise Usage(f"no usable key for {name} at {humankeys.key_path(name)} (nor a security key at "
                    f"{security_key.handle_path(name)}): this needs a human enrolled in the repository (`lonca human "
                    f"key --human {name}` makes a key, which an enrolled human enrols in the console's Keys page); an "
                    "agent runs it in its workspace, with the session token there")
    return key


def login(client: Client, name: str, repo: str | None = None, ttl_ms: int = LOGIN_TTL_DEFAULT_MS) -> dict:
    key = need_key(name)
    try:
        res = client.call("human.login", {"sig": key.sign_login(repo, ttl_ms), "ttl_ms": ttl_ms}, repo=repo)
    except LoncaError as e:
        if e.code == "unauthenticated" and "bad_human_signature" in e.message:
            raise LoncaError(e.code, f"{e.message}. Is this key enrolled? `lonca human key --human {name}` prints it; "
                                     "a human enrolled in a repository enrols it (console: Keys, \"Enrol a file key\")") from None
        raise
    path = humankeys.write_session(name, res["token"], res["expires_ms"])
    return {**res, "session_file": str(path)}


def human_token(client: Client, name: str) -> str:
    """The saved session's token, logging in first when there is none usable."""
    token = humankeys.read_session(name, now_ms())
    return token if token is not None else login(client, name)["token"]


def human_call(client: Client, name: str, method: str, params: dict | None = None, repo: str | None = None):
    """A call with the human session; an expired or foreign session logs in again once."""
    try:
        return client.call(method, params, repo=repo, token=human_token(client, name))
    except LoncaError as e:
        if e.code not in ("unauthenticated", "forbidden"):
            raise
        return client.call(method, params, repo=repo, token=login(client, name)["token"])


def human_submit(client: Client, name: str, repo: str, op: dict) -> dict:
    """`op` signed with the human's key, submitted with their session. The session comes first and
    the operation is signed after it: a security key's counter goes up with each signature, and
    the worker refuses one that goes back (a login signed after the operation would)."""
    key = need_key(name)
    token = human_token(client, name)
    try:
        return client.call("human.submit", {"op": op, "sig": key.sign_op(repo, op)}, repo=repo, token=token)
    except LoncaError as e:
        if e.code not in ("unauthenticated", "forbidden"):
            raise
        token = login(client, name)["token"]
        return client.call("human.submit", {"op": op, "sig": key.sign_op(repo, op)}, repo=repo, token=token)


def pick_repo(client: Client, name: str, repo: str | None) -> str:
    if repo:
        return repo
    repos = human_call(client, name, "repo.list")
    if len(repos) != 1:
        raise Usage(f"name the repository with --repo (you are enrolled in {len(repos)}: {', '.join(repos) or 'none'})")
    return repos[0]


# what reads a repository: the agent of this workspace, else the human ------------------------

Read = Callable[..., object]


def agent_workspace() -> wsp.Workspace | None:
    """The agent workspace the command runs in, if its session token is still there."""
    try:
        ws = wsp.find()
    except Usage:
        return None
    return ws if ws.session and wsp.token_file(ws.root).exists() else None


def reader(c: Client, args) -> tuple[str, Read]:
    """(repo, read(method, params)) for a command that only reads (the seed's `read` credential:
    an agent token for its repository, or a human). In an agent's workspace the agent reads with
    its own token, unless --human or another --repo says a human reads."""
    ws = None if getattr(args, "human", None) else agent_workspace()
    if ws is not None and args.repo in (None, ws.repo):
        token = ws.agent_token()
        return ws.repo, lambda method, params=None: c.call(method, params, repo=ws.repo, token=token)
    name = human_name(args)
    repo = pick_repo(c, name, args.repo)
    return repo, lambda method, params=None: human_call(c, name, method, params, repo=repo)


def own_key(name: str) -> tuple[humankeys.Signer, bool]:
    """The human's key (the file key, else the security key); a file key is made when there is
    neither. (key, whether it was made now)."""
    key = humankeys.load_signer(name)
    if key is not None:
        return key, False
    if humankeys.key_path(name).exists():
        raise Usage(f"{humankeys.key_path(name)} exists but is not a private regular file of yours; fix its mode (0600)")
    return humankeys.create_key(name), True


def cmd_init(args) -> int:
    name = human_name(args)
    key, created = own_key(name)
    import_from = os.path.abspath(args.import_from) if args.import_from and "://" not in args.import_from and "@" not in args.import_from else args.import_from
    with Client() as c:
        # Once the worker serves a repository, creating another takes a human session (the
        # seed's `bootstrap`): the saved one, else a login with this key, which must be enrolled.
        # While it serves none, no session is needed (nor sent: a stale saved one would refuse).
        token = None if c.call("ping")["bootstrap"] else human_token(c, name)
        params = {"repo": args.repo, "human": name, "human_key": key.public, "import_from": import_from,
                  "branch": args.branch, "profile": args.profile, "without_presence": args.without_presence}
        try:
            prepared = c.call("repo.prepare_init", params, token=token)
        except LoncaError as e:
            if token is None or e.code != "unauthenticated":
                raise
            token = login(c, name)["token"]     # the saved session was gone (a restarted worker)
            prepared = c.call("repo.prepare_init", params, token=token)
        res = c.call("repo.init", {"op": prepared["op"], "sig": key.sign_op(args.repo, prepared["op"])}, token=token)
    out = {"repo": args.repo, "trunk": prepared["op"]["trunk"], "seq": res["seq"], "decision": res["decision"],
           "warnings": prepared["warnings"], "profile": prepared["profile"], "branch": prepared.get("branch")}
    if args.json:
        emit_json(out)
    else:
        if created:
            print(f"created your key {humankeys.key_path(name)}")
        print(f"{paint('created', '32')} repository {args.repo} at trunk {out['trunk'][:12]} (seq {out['seq']}, profile {out['profile']}"
              + (f", from branch {out['branch']})" if out["branch"] else ")"))
        for w in prepared["warnings"]:
            print(f"warning: {w}", file=sys.stderr)
    return decision_exit(res["decision"])


def cmd_login(args) -> int:
    name = human_name(args)
    with Client() as c:
        res = login(c, name, args.repo, args.ttl_ms)
        repos = c.call("repo.list", token=res["token"])
    out = {"human": res["human"], "expires_ms": res["expires_ms"], "session_file": res["session_file"], "repos": repos}
    if args.json:
        emit_json(out)
    else:
        print(f"logged in as {out['human']} until {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(out['expires_ms'] / 1000))}")
        print(f"  session file {out['session_file']}; repositories: {', '.join(repos) or 'none'}")
    return OK


def cmd_key(args) -> int:
    """The public part to paste into the console's "Enrol a file key" (or to read to the human
    who enrols it), with the fingerprint both compare. The private key never leaves its file."""
    name = human_name(args)
    key, created = _own_security_key(name, args.security_key) if args.security_key else own_key(name)
    # what `lonca human enrol --public` takes: a security key's .pub line, a file key's alg:hex
    public = key.line if isinstance(key, security_key.SecurityKey) else f"{key.public['alg']}:{key.public['public']}"
    out = {"human": name, **key.public, "created": created, "fingerprint": humansig.fingerprint(key.public)}
    if args.json:
        emit_json(out)
    else:
        if created:
            print(f"created your key {key.handle if isinstance(key, security_key.SecurityKey) else humankeys.key_path(name)}",
                  file=sys.stderr)
        print(public)
        print(f"name {name}, fingerprint {out['fingerprint']}: enrol it as {name} (console: Keys), "
              f"then `lonca human login --human {name}`", file=sys.stderr)
    return OK


def _own_security_key(name: str, kind: str) -> tuple[security_key.SecurityKey, bool]:
    """The human's security key, enrolled on the device when there is none."""
    if humankeys.key_path(name).exists():
        raise Usage(f"{name} has a file key ({humankeys.key_path(name)}), which this machine signs with first: a name "
                    "signs with one key. Use another name for the security key, or enrol it and then remove the file key")
    key = security_key.load(name)
    if key is not None:
        if key.public["alg"] != f"sk-{kind}":
            raise Usage(f"{name}'s security key {key.handle} is {key.public['alg']}, not sk-{kind}")
        return key, False
    if security_key.handle_path(name).exists():
        raise Usage(f"{security_key.handle_path(name)} exists but is not a private file of yours with its .pub beside it")
    return security_key.create(name, kind), True


def cmd_enrol(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        if args.public:
            key = humansig.file_key_from_text(args.public) or sshsig.key_from_openssh(args.public)
            if key is None:
                raise Usage("--public is the line `lonca human key` prints (ed25519: and 64 hex digits), or a "
                            "security key's .pub line (ssh-keygen -t ed25519-sk or ecdsa-sk -O application=ssh:lonca)")
        else:
            known = human_call(c, name, "status", repo=args.as_in)["humans"].get(args.name)
            if known is None:
                raise Usage(f"{args.name} is not enrolled in {args.as_in}")
            key = {"alg": known["alg"], "public": known["public"]}
        res = human_submit(c, name, repo, {"op": "human.enroll", "human": args.name, "key": key})
    out = {"seq": res["seq"], "decision": res["decision"], "repo": repo, "human": args.name,
           "fingerprint": humansig.fingerprint(key)}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint(res['decision']['outcome'], '32')}  enrolled {args.name} in {repo} (fingerprint {out['fingerprint']}, seq {res['seq']})")
    return decision_exit(res["decision"])


def cmd_whoami(args) -> int:
    key = need_key(human_name(args))
    out = {"human": key.name, **key.public}
    if args.json:
        emit_json(out)
    else:
        print(f"{key.name}: {out['alg']} {out['public']}")
    return OK


# -- reading ---------------------------------------------------------------------------------

def cmd_status(args) -> int:
    with Client() as c:
        _, read = reader(c, args)
        st = read("status")
    if args.json:
        emit_json(st, pretty=True)
        return OK
    print(f"{paint(st['repo'], '1')}  trunk {st['trunk'][:12]}  next seq {st['next_seq']}  frozen: {st['frozen'] or 'no'}")
    if st.get("foreign"):
        print(f"foreign: its log is on daemon key {st['daemon_key'][:16]}…, which this daemon does not hold; writes wait "
              f"for `lonca human recover-daemon-key --repo {st['repo']}`")
    print(f"humans: {', '.join(sorted(st['humans'])) or 'none'}")
    live = [s for s in st["sessions"] if s["active"]]
    print(f"sessions: {len(live)} active of {len(st['sessions'])}")
    for s in live:
        print(f"  {s['id']}  {s['agent']}  task {s['task'] or '-'}  expires {time.strftime('%H:%M:%S', time.localtime(s['expires_ms'] / 1000))}")
    print(f"queue: {len(st['queue'])}  pending: {len(st['pending'])}  leases: {len(st['leases'])}")
    return OK


def cmd_log(args) -> int:
    with Client(timeout=None if args.follow else 60) as c:
        _, read = reader(c, args)
        for e in log_entries(read, args.start, follow=args.follow):
            if args.json:
                emit_json(e)
            else:
                en = e["entry"]
                t = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(en["time_ms"] / 1000))
                print(f"{en['seq']:>6}  {t}  {actor_label(en['actor']):<32} {en['op']['op']:<18} {en['decision']['outcome']}"
                      + (f" ({', '.join(en['decision']['reasons'])})" if en["decision"]["reasons"] else ""), flush=True)
    return OK


def log_entries(read: Read, start: int = 1, follow: bool = False) -> Iterator[dict]:
    """A repository's log from seq `start`, page after page until one comes back empty (the
    worker decides how long a page is); `follow` waits for new entries instead of stopping."""
    while True:
        page = read("log", {"from": start, "wait_ms": 30_000 if follow else None})
        if not page and not follow:
            return
        yield from page
        if page:
            start = page[-1]["entry"]["seq"] + 1


# -- audit -----------------------------------------------------------------------------------

def _rows_from_database(url: str, repo: str | None) -> dict[str, list[tuple[str, str, str]]]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DatabaseError

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            q = "SELECT repo, seq, entry, hash, sig FROM log_entries" + (" WHERE repo = :repo" if repo else "") + " ORDER BY repo, seq"
            out: dict[str, list] = {}
            for r in conn.execute(text(q), {"repo": repo} if repo else {}):
                out.setdefault(r.repo, []).append((r.entry, r.hash, r.sig))
            return out
    except DatabaseError as e:
        raise database_problem(e, engine.url.render_as_string(hide_password=True)) from None
    finally:
        engine.dispose()


def _rows_from_file(path: str, repo: str | None) -> dict[str, list[tuple[str, str, str]]]:
    rows: list[tuple[str, str, str]] = []
    name = repo
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                rows.append((canonical(item["entry"]).decode(), item["hash"], item["sig"]))
            except (ValueError, KeyError, TypeError):
                raise Usage(f"{path}:{n} is not an exported log line") from None
            if name is None and item["entry"].get("seq") == 1:
                name = item["entry"]["op"].get("repo")
    if name is None:
        raise Usage("name the repository with --repo (the export has no repo.init)")
    return {name: rows}


def _tree_reader(folder: str | None, repo: str) -> Callable[[str], str | None] | None:
    """commit -> its tree id, from the repository's git store in `folder`; None without one."""
    path = Path(folder) / f"{repo}.git" if folder else None
    if path is None or not path.is_dir():
        return None
    import pygit2
    store = pygit2.Repository(str(path))

    def tree_of(commit: str) -> str | None:
        try:
            return str(store[commit].peel(pygit2.Commit).tree_id)
        except (KeyError, ValueError, pygit2.GitError):
            return None
    return tree_of


def cmd_audit_verify(args) -> int:
    if args.file:
        logs = _rows_from_file(args.file, args.repo)
    else:
        url = args.database or paths.database_url()
        if url.startswith("sqlite:///") and not os.path.exists(url[len("sqlite:///"):]):
            raise Usage(f"no database at {url[len('sqlite:///'):]}; set LONCA_HOME or pass --database")
        logs = _rows_from_database(url, args.repo)
    if args.repo and args.repo not in logs:
        raise Usage(f"no log of {args.repo} there")
    folder = args.witness or (None if args.file else str(paths.lonca_home() / "witness"))
    witnesses = read_witnesses(Path(folder)) if folder else {}
    if args.repo:
        witnesses = {r: w for r, w in witnesses.items() if r == args.repo}
    stores = args.stores or (None if args.file else str(paths.lonca_home() / "repos"))
    results = []
    for repo, rows in sorted(logs.items()):
        count, problem = verify_entries(repo, rows)
        tree_of = _tree_reader(stores, repo)
        landings = 0
        if problem is None:
            landings, problem = landing_problems(rows, tree_of)
        result = {"repo": repo, "entries": count, "ok": problem is None,
                  "bad_seq": problem.seq if problem else None, "reason": problem.reason if problem else None,
                  "checked_landings": landings, "trees_compared": tree_of is not None}
        w = witnesses.get(repo)
        if w and problem is None:
            key = json.loads(rows[0][0])["op"].get("daemon_key") if rows else None
            why = witness_problem(w, count, rows[w["seq"] - 1][1] if w["seq"] <= count else None, key)
            if why:
                result.update(ok=False, bad_seq=min(w["seq"], count + 1), reason=why)
        results.append(result)
    for repo in sorted(set(witnesses) - set(logs)):
        results.append({"repo": repo, "entries": 0, "ok": False, "bad_seq": 1,
                        "reason": f"the log is gone but its witness records seq {witnesses[repo]['seq']}",
                        "checked_landings": 0, "trees_compared": False})
    ok = all(r["ok"] for r in results)
    if args.json:
        emit_json({"ok": ok, "logs": results})
    else:
        for r in results:
            if r["ok"]:
                trees = ("each checked integration's tree is the one its checks passed on" if r["trees_compared"]
                         else "no git store: integrated trees not compared (--stores)")
                print(f"{paint('ok', '32')}   {r['repo']}: {r['entries']} entries; chain, daemon and human signatures verify; "
                      f"{r['checked_landings']} checked integrations, {trees}")
            else:
                print(f"{paint('BAD', '31')}  {r['repo']}: seq {r['bad_seq']}: {r['reason']} ({r['entries']} entries verify)")
    if not ok:
        bad = next(r for r in results if not r["ok"])
        print(f"integrity: {bad['repo']} seq {bad['bad_seq']}: {bad['reason']}", file=sys.stderr)
    return OK if ok else REFUSED


# -- doctor ----------------------------------------------------------------------------------

def _check(name, level, detail, hint=None) -> dict:
    return {"name": name, "level": level, "detail": detail, "hint": hint}


def _mode_check(sock: Path) -> tuple[str | None, dict]:
    """(mode, its check) from the install file as clients read it (lonca/install.py), and the
    owner of the socket: a file that is not to be trusted, or that names a uid the daemon does not
    run as, makes no hardened install, and says why."""
    found = install.read()
    if found.problem:
        return None, _check("mode", "fail", f"not hardened: {found.problem}, and no client trusts the daemon", found.hint)
    if found.daemon_uid is None:
        return "cooperative", _check("mode", "pass", f"cooperative: the daemon runs as your user (no {found.path})")
    try:
        owner: int | None = os.lstat(sock).st_uid
    except OSError:
        owner = None    # the socket check below says so
    if owner is not None and owner != found.daemon_uid:
        return None, _check("mode", "fail", f"not hardened: {found.path} names uid {found.daemon_uid} as the daemon's, but "
                                            f"{sock} belongs to uid {owner}: that daemon is not the install's, and no client trusts it",
                            f"start the daemon as uid {found.daemon_uid}, or (as root) name the daemon's uid in {found.path}")
    return "hardened", _check("mode", "pass", f"hardened: {found.path} names uid {found.daemon_uid} as the daemon's")


def doctor_checks(name: str) -> tuple[str | None, list[dict]]:
    sock = paths.socket_path()
    mode, mode_check = _mode_check(sock)
    checks = [mode_check]
    client = Client(timeout=10)
    try:
        client.connect()
        checks.append(_check("socket", "pass", f"{sock} is a socket of the daemon's user"))
        pong = checked_ping(client)
        checks.append(_check("daemon", "pass", f"lonca {pong['version']}, protocol {pong['protocol']}"))
        if pong.get("hardened") != (mode == "hardened"):  # the daemon read another file (LONCA_DAEMON_TOML)
            said = "hardened" if pong.get("hardened") else "not hardened"
            mode = "hardened" if pong.get("hardened") else "cooperative"
            checks[0] = _check("mode", "warn", f"{mode_check['detail']}; but the daemon says it is {said} (ping.hardened): "
                                               "it read another install file", "start the daemon with the same LONCA_DAEMON_TOML as its clients")
    except Unreachable as e:
        checks.append(_check("socket", "fail", str(e), "mend the install file first (Mode)" if mode_check["level"] == "fail"
                             else "start the daemon: `lonca daemon` (or `make run`)"))
        checks.append(_check("daemon", "fail", "not reachable", "start the daemon, then run doctor again"))
        client = None
    git = shutil.which("git")
    if git:
        ver = subprocess.run([git, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        checks.append(_check("git", "pass", ver))
    else:
        checks.append(_check("git", "warn", "git is not on PATH", "install git to use workspaces"))
    key = humankeys.load_signer(name)
    if key is None:
        checks.append(_check("human", "warn", f"no file key for {name}", "`lonca human key` creates one, to enrol in the console's Keys page"))
    elif isinstance(key, security_key.SecurityKey):  # its login, without a saved session, asks for a touch
        checks.append(_check("human", "pass", f"{name} has an {key.public['alg']} security key ({key.handle})"))
    else:
        checks.append(_check("human", "pass", f"{name} has an ed25519 file key"))
    if client is not None and key is not None:
        try:
            repos = human_call(client, name, "repo.list")
        except LoncaError as e:
            repos = []
            checks.append(_check("human", "warn", f"{name} could not log in ({e.code})", "is your key enrolled in a repository?"))
        for repo in repos:
            checks.extend(_repo_checks(client, name, repo, key))
    if client is not None:
        client.close()
    return mode, checks


def _repo_checks(client: Client, name: str, repo: str, key: humankeys.Signer) -> list[dict]:
    count, problem = verify_entries(repo, ((canonical(e["entry"]).decode(), e["hash"], e["sig"])
                                           for e in log_entries(lambda m, p=None: human_call(client, name, m, p, repo=repo))))
    out = [_check(f"log {repo}", "pass", f"{count} entries verify") if problem is None
           else _check(f"log {repo}", "fail", str(problem), "run `lonca audit verify` and restore from a backup")]
    st = human_call(client, name, "status", repo=repo)
    out.append(_check(f"human {repo}", "pass", f"{name} is enrolled"))
    out.append(_check(f"frozen {repo}", "pass", "not frozen") if not st["frozen"]
               else _check(f"frozen {repo}", "warn", f"frozen: {st['frozen']}", "a human unfreezes it"))
    out.append(_presence_check(name, repo, st, key))
    if st.get("policy_problem"):    # an imported lonca.toml or policy.cedar that does not parse
        cedar = st["policy_problem"].startswith("policy.cedar")
        out.append(_check(f"policy {repo}", "warn", st["policy_problem"],
                          "send one that parses: lonca policy --cedar FILE" if cedar else
                          "the defaults hold; correct lonca.toml with human.prepare_policy and policy.update"))
    return out


def _presence_check(name: str, repo: str, st: dict, key: humankeys.Signer) -> dict:
    """An agent must not approve its own change: a file key that can sign writes, readable by
    agents that run as this user, lets one (docs/decisions.md, "An agent must not approve its own change")."""
    what = f"presence {repo}"
    if st.get("presence_required"):
        return _check(what, "pass", "approvals and other writes need a key that proves presence")
    if isinstance(key, security_key.SecurityKey):
        return _check(what, "pass", "your security key needs a touch for each signature: an agent can not sign with it")
    if os.getuid() in st.get("agent_uids", []):
        return _check(what, "warn", f"your file key {humankeys.key_path(name)} can approve changes in {repo}, and "
                                    f"agents connect as your user (uid {os.getuid()}): an agent can read the key and "
                                    "approve its own change",
                      "run agents under another user (README, \"Agents under another user\"), or set [review] "
                      "presence_required = true and approve with a passkey in the console")
    return _check(what, "pass", f"your file key can approve in {repo}; no agent has connected as your user "
                                "since the worker started (run agents under another user)")


def cmd_doctor(args) -> int:
    mode, checks = doctor_checks(human_name(args))
    ok = not any(c["level"] == "fail" for c in checks)
    if args.json:
        emit_json({"ok": ok, "mode": mode, "checks": checks})
    else:
        marks = {"pass": paint("[✓]", "32"), "warn": paint("[!]", "33"), "fail": paint("[✗]", "31")}
        for c in checks:
            print(f"{marks[c['level']]} {c['name'][:1].upper() + c['name'][1:]}: {c['detail']}")
            if c["level"] != "pass" and c["hint"]:
                print(f"    • {c['hint']}")
        issues = sum(1 for c in checks if c["level"] != "pass")
        print(f"\n{'No issues found!' if not issues else f'Doctor found issues in {issues} categor' + ('y.' if issues == 1 else 'ies.')}")
    return OK if ok else REFUSED
