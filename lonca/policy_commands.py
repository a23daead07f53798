"""`lonca policy`: put a policy in force from files, one operation signed with the human's file key
(human.prepare_policy writes the policy commit, human.submit logs its policy.update). A file not
given is kept as the policy in force has it (docs/policy.md): `--cedar policy.cedar` alone changes
who may do what and leaves lonca.toml as it is."""
import base64
from pathlib import Path

from lonca.admin_commands import human_call, human_name, human_submit, pick_repo
from lonca.client import Client
from lonca.output import Usage, command, decision_exit, emit_json, paint
from lonca.protocol import LoncaError


def register(sub) -> None:
    p = command(sub, "policy", "put lonca.toml and/or policy.cedar in force, signed", cmd_policy, repo=True)
    p.add_argument("--config", metavar="FILE", help="the new lonca.toml (default: the one in force)")
    p.add_argument("--cedar", metavar="FILE", help="the new policy.cedar (default: the one in force; an empty "
                   "file: nothing decided)")


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise Usage(f"{what} {path} can not be read: {e}") from None


def _in_force(c: Client, name: str, repo: str) -> str:
    """lonca.toml of the policy in force; empty when it has none (the defaults hold)."""
    commit = human_call(c, name, "status", repo=repo)["policy"]
    try:
        got = human_call(c, name, "blobs", {"commit": commit, "paths": ["lonca.toml"]}, repo=repo)
    except LoncaError as e:
        if e.code != "not_found":
            raise
        return ""
    return base64.b64decode(got[0]["content_b64"]).decode("utf-8")


def cmd_policy(args) -> int:
    if args.config is None and args.cedar is None:
        raise Usage("give --config lonca.toml, --cedar policy.cedar, or both")
    name = human_name(args)
    config = _read(args.config, "--config") if args.config is not None else None
    params = {"policy": _read(args.cedar, "--cedar")} if args.cedar is not None else {}
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        params["config"] = config if config is not None else _in_force(c, name, repo)
        op = human_call(c, name, "human.prepare_policy", params, repo=repo)["op"]
        res = human_submit(c, name, repo, op)
    out = {"repo": repo, "seq": res["seq"], "decision": res["decision"], "policy": op["policy"]}
    if args.json:
        emit_json(out)
    elif res["decision"]["outcome"] == "allow":
        print(f"{paint('policy', '32')} {op['policy'][:12]} in force in {repo} (seq {res['seq']})")
    return decision_exit(res["decision"])
