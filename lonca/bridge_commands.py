"""`lonca import` and `lonca push`: a human brings a branch of a remote onto trunk, or pushes trunk
to a remote, each one operation signed with the human's file key (human.prepare_import /
prepare_push, then human.submit). git's credential helpers and SSH agent authenticate, in the
worker: a remote is given without a password. `lonca backup` and `lonca restore`: a repository
as one Git bundle, log included (repo.backup, repo.restore)."""
import os
import sys

from lonca.admin_commands import human_call, human_name, human_submit, human_token, pick_repo
from lonca.client import Client
from lonca.output import OK, command, decision_exit, emit_json, paint


def register(sub) -> None:
    i = command(sub, "import", "bring a branch of a remote onto trunk (fast-forward only), signed", cmd_import, repo=True)
    i.add_argument("remote", help="an absolute path, https://, ssh:// or user@host:path")
    i.add_argument("--branch", help="the branch to import (default: main, where `lonca push` pushes)")
    p = command(sub, "push", "push trunk to a remote's main, signed (the entry is logged first)", cmd_push, repo=True)
    p.add_argument("remote", help="an absolute path, https://, ssh:// or user@host:path")
    command(sub, "backup", "write a Git bundle of a repository, its log included", cmd_backup, repo=True)
    r = command(sub, "restore", "make a repository again from a backup bundle (its log verified)", cmd_restore,
                human=True)
    r.add_argument("repo", help="the repository's name (the one its log signs)")
    r.add_argument("--from", dest="source", required=True, metavar="BUNDLE", help="a bundle lonca backup wrote, "
                   "a bare store or a remote Lonca pushed to")


def _remote(text: str) -> str:
    """A local path as the worker needs it (absolute); any other remote as given."""
    return text if "://" in text or ("@" in text and ":" in text) or text.startswith("/") else os.path.abspath(text)


def cmd_import(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        op = human_call(c, name, "human.prepare_import", {"remote": _remote(args.remote), "branch": args.branch}, repo=repo)["op"]
        res = human_submit(c, name, repo, op)
    out = {"repo": repo, "seq": res["seq"], "decision": res["decision"], "remote": op["remote"],
           "commit": op["commit"], "trunk_before": op["trunk_before"]}
    if args.json:
        emit_json(out)
    elif res["decision"]["outcome"] == "allow":
        print(f"{paint('imported', '32')} {op['commit'][:12]} from {op['remote']} onto {repo}'s trunk "
              f"(was {op['trunk_before'][:12]}, seq {res['seq']})")
    return decision_exit(res["decision"])


def cmd_push(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        op = human_call(c, name, "human.prepare_push", {"remote": _remote(args.remote)}, repo=repo)["op"]
        res = human_submit(c, name, repo, op)
    out = {"repo": repo, "seq": res["seq"], "decision": res["decision"], "remote": op["remote"],
           "trunk": res.get("trunk"), "push": res.get("push")}
    if args.json:
        emit_json(out)
    elif res["decision"]["outcome"] == "allow":
        print(f"{paint('pushed', '32')} {repo}'s trunk {out['trunk'][:12]} to {op['remote']} (seq {res['seq']})")
        print(out["push"])
    return decision_exit(res["decision"])


def cmd_backup(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        out = human_call(c, name, "repo.backup", {}, repo=repo)
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('backed up', '32')} {repo} to seq {out['seq']}: {out['path']}")
    return OK


def cmd_restore(args) -> int:
    name = human_name(args)
    with Client() as c:
        # bootstrap, as `lonca init`: no session while the worker serves no repository
        token = None if c.call("ping")["bootstrap"] else human_token(c, name)
        out = c.call("repo.restore", {"repo": args.repo, "from": _remote(args.source)}, token=token)
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('restored', '32')} {out['repo']} at seq {out['seq']} (head {out['head_hash'][:12]}) in {out['path']}")
        if out["foreign"]:
            print(f"its log is on another daemon's key ({out['daemon_key'][:16]}…): it is read-only until one of its "
                  f"humans runs `lonca human recover-daemon-key --repo {out['repo']}`", file=sys.stderr)
    return OK
