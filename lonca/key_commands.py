"""The key lifecycle from the CLI: `lonca human rotate | recovery-key | recover | revoke |
revoke-session | rotate-daemon-key`, each one signed operation per repository (docs/decisions.md, "The key lifecycle").

A new file key is written beside the old one (`<name>.key.new`) before anything is submitted and
takes the old one's place only once every repository took it, so an interrupted rotation leaves
both keys on disk and says which repositories moved; the private key never leaves its file."""
import os
import sys
from pathlib import Path

from lonca import humankeys, humansig, security_key
from lonca.admin_commands import human_call, human_name, human_submit, need_key, pick_repo
from lonca.client import Client
from lonca.output import OK, Usage, command, emit_json, paint
from lonca.protocol import LoncaError


def register(h) -> None:
    """Under `lonca human` (admin_commands makes the group)."""
    ro = command(h, "rotate", "move your name to a new file key in every repository it is enrolled in; "
                              "the old key and its sessions end", cmd_rotate, human=True)
    ro.add_argument("--security-key", choices=sorted(security_key.KINDS), metavar="KIND",
                    help="move it to a new FIDO security key instead (ed25519 or p256), made with ssh-keygen; "
                         "the file key is removed once every repository took the new key")
    command(h, "recovery-key", "make a recovery key and enrol it for your name (then keep it offline)",
            cmd_recovery_key, repo=True)
    rc = command(h, "recover", "a new file key for your name, signed by your recovery key (no session needed)",
                 cmd_recover, repo=True)
    rc.add_argument("--recovery-key", metavar="FILE", help="the recovery key (default: where recovery-key wrote it)")
    rv = command(h, "revoke", "cut a human's key off a repository; every session of that key ends", cmd_revoke, repo=True)
    rv.add_argument("name", help="the human name to revoke (yours included)")
    rv.add_argument("--reason", required=True, help="why, for the log")
    rd = command(h, "recover-daemon-key", "adopt a restored repository whose log is on another daemon's key (foreign) "
                                          "with this daemon's key: one signed daemon.recover", cmd_recover_daemon_key,
                 repo=True)
    rd.add_argument("--recovery-key", metavar="FILE", help="sign with your recovery key, with no session (your key was "
                                                           "lost with the old machine): your name also moves to a new file key")
    command(h, "rotate-daemon-key", "move each of your repositories to the daemon's next key "
                                    "(daemon.prepare_rotate, then a signed daemon.rotate each)", cmd_rotate_daemon_key, human=True)
    rs = command(h, "revoke-session", "end an agent's session and every capability made from it (cap.revoke)",
                 cmd_revoke_session, repo=True)
    rs.add_argument("session")
    rs.add_argument("--reason", required=True, help="why, for the log")


def _new_key_file(name: str) -> tuple[humankeys.HumanKey, Path]:
    staged = humankeys.key_path(name).with_name(f"{name}.key.new")
    if staged.exists():
        raise Usage(f"{staged} exists: a rotation or recovery was interrupted. Log in with each key to see which one "
                    "your repositories hold (`lonca status`), keep that one as "
                    f"{humankeys.key_path(name)}, and remove the other")
    return humankeys.create_key(name, staged), staged


def _adopt(name: str, staged: Path) -> None:
    os.replace(staged, humankeys.key_path(name))
    humankeys.session_path(name).unlink(missing_ok=True)  # its session ended with the old key


def _new_security_key(name: str, kind: str) -> tuple[security_key.SecurityKey, Path]:
    """A new security key for a name that signs with its file key: the file key goes on signing
    (it is loaded first) until every repository took the new one, then it is removed."""
    handle = security_key.handle_path(name)
    if not isinstance(need_key(name), humankeys.HumanKey):
        raise Usage(f"{name} signs with the security key {handle} already: a new one is enrolled from the console, "
                    "or under another name")
    if handle.exists():
        raise Usage(f"{handle} exists: a rotation to it was interrupted. Log in with each key to see which one your "
                    f"repositories hold (`lonca status`), and remove the other ({humankeys.key_path(name)} or {handle} "
                    "with its .pub)")
    return security_key.create(name, kind), handle


def _forget_security_key(handle: Path) -> None:
    handle.unlink(missing_ok=True)
    handle.with_name(handle.name + ".pub").unlink(missing_ok=True)


def cmd_rotate(args) -> int:
    name = human_name(args)
    need_key(name)
    new: humankeys.Signer
    new, staged = _new_security_key(name, args.security_key) if args.security_key else _new_key_file(name)
    moved: list[dict] = []
    with Client() as c:
        repos = human_call(c, name, "repo.list")
        if not repos:
            if args.security_key:
                _forget_security_key(staged)
            else:
                staged.unlink()
            raise Usage(f"{name}'s key is enrolled in no repository of this daemon: nothing to rotate")
        try:
            for repo in repos:
                res = human_submit(c, name, repo, {"op": "human.rotate", "human": name, "key": new.public})
                moved.append({"repo": repo, "seq": res["seq"], "sessions_ended": res["sessions_ended"]})
        except LoncaError as e:
            left = [r for r in repos if r not in {m["repo"] for m in moved}]
            raise LoncaError(e.code, f"{e.message}. Rotated in {', '.join(m['repo'] for m in moved) or 'none'}, not in "
                                     f"{', '.join(left)}: the new key waits in {staged}, the old one is still "
                                     f"{humankeys.key_path(name)}") from None
    if args.security_key:   # the security key signs from now on: the file key it replaced goes
        humankeys.key_path(name).unlink()
        humankeys.session_path(name).unlink(missing_ok=True)
    else:
        _adopt(name, staged)
    out = {"human": name, **new.public, "fingerprint": humansig.fingerprint(new.public), "repos": moved}
    if args.json:
        emit_json(out)
    else:
        for m in moved:
            print(f"{paint('allow', '32')}  {m['repo']}: {name} signs with the new key from seq {m['seq']} "
                  f"({m['sessions_ended']} sessions of the old key ended)")
        print(f"new key {staged if args.security_key else humankeys.key_path(name)}, fingerprint {out['fingerprint']}")
    return OK


def cmd_recovery_key(args) -> int:
    name = human_name(args)
    path = humankeys.recovery_key_path(name)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        key = humankeys.load_key(name, path)
        if key is None:
            if path.exists():
                raise Usage(f"{path} exists but is not a private regular file of yours; fix its mode (0600)")
            key = humankeys.create_key(name, path)
        res = human_submit(c, name, repo, {"op": "human.recovery_key", "human": name, "key": key.public})
    out = {"repo": repo, "human": name, "seq": res["seq"], "recovery_key_file": str(path),
           "fingerprint": humansig.fingerprint(key.public)}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('allow', '32')}  {repo}: a recovery key for {name} (fingerprint {out['fingerprint']}, seq {res['seq']})")
        print(f"move {path} off this machine (a USB key, a safe): anyone who reads it can take your name "
              f"in {repo}; `lonca human recover --repo {repo} --recovery-key FILE` uses it once", file=sys.stderr)
    return OK


def _recovery_key(name: str, given: str | None) -> humankeys.HumanKey:
    path = Path(given) if given else humankeys.recovery_key_path(name)
    recovery = humankeys.load_key(name, path)
    if recovery is None:
        raise Usage(f"no usable recovery key at {path} (a private regular file of yours, 0600, "
                    "as `lonca human recovery-key` wrote it)")
    return recovery


def _submit_recovery(c: Client, recovery: humankeys.HumanKey, repo: str, op: dict, staged: Path) -> dict:
    """`op` signed by the recovery key, with no token (its signature is the credential); the
    new key file takes the old one's place only once the worker took it."""
    try:
        res = c.call("human.submit", {"op": op, "sig": recovery.sign_op(repo, op)}, repo=repo)
    except LoncaError:
        staged.unlink()
        raise
    _adopt(recovery.name, staged)
    return res


def cmd_recover(args) -> int:
    name = human_name(args)
    recovery = _recovery_key(name, args.recovery_key)
    if not args.repo:
        raise Usage("name the repository to recover your name in with --repo")
    new, staged = _new_key_file(name)
    op = {"op": "human.recover", "human": name, "key": new.public}
    with Client() as c:
        res = _submit_recovery(c, recovery, args.repo, op, staged)
    out = {"repo": args.repo, "human": name, **new.public, "fingerprint": humansig.fingerprint(new.public),
           "seq": res["seq"], "sessions_ended": res["sessions_ended"]}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('allow', '32')}  {args.repo}: {name} signs with a new key (fingerprint {out['fingerprint']}, "
              f"seq {res['seq']}); {res['sessions_ended']} sessions of the old key ended")
        print(f"the recovery key is spent: `lonca human recovery-key --repo {args.repo}` sets a new one", file=sys.stderr)
    return OK


def cmd_revoke(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        res = human_submit(c, name, repo, {"op": "human.revoke", "human": args.name, "reason": args.reason})
    out = {"repo": repo, "human": args.name, "seq": res["seq"], "sessions_ended": res["sessions_ended"]}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('allow', '32')}  {repo}: {args.name} revoked (seq {res['seq']}); "
              f"{res['sessions_ended']} sessions of that key ended")
    return OK


def cmd_recover_daemon_key(args) -> int:
    name = human_name(args)
    if not args.repo:
        raise Usage("name the restored repository with --repo (repositories waiting for daemon.recover are not listed)")
    recovery = _recovery_key(name, args.recovery_key) if args.recovery_key else None
    out: dict = {"repo": args.repo, "human": name}
    with Client() as c:
        op = {"op": "daemon.recover", "key": c.call("ping")["daemon_key"]}
        if recovery is None:
            need_key(name)
            res = human_submit(c, name, args.repo, op)
        else:
            new, staged = _new_key_file(name)
            op["recover"] = {"human": name, "key": new.public}
            res = _submit_recovery(c, recovery, args.repo, op, staged)
            out.update(new.public, fingerprint=humansig.fingerprint(new.public), sessions_ended=res["sessions_ended"])
    out.update(seq=res["seq"], decision=res["decision"], daemon_key=op["key"])
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('allow', '32')}  {args.repo}: signed with this daemon's key {op['key'][:16]}… from seq {res['seq']}")
        if recovery is not None:
            print(f"{name} signs with a new key (fingerprint {out['fingerprint']}); the recovery key is spent: "
                  f"`lonca human recovery-key --repo {args.repo}` sets a new one", file=sys.stderr)
    return OK


def cmd_rotate_daemon_key(args) -> int:
    name = human_name(args)
    with Client() as c:
        prepared = human_call(c, name, "daemon.prepare_rotate")
        moved = [{"repo": repo, "seq": human_submit(c, name, repo, {"op": "daemon.rotate", "key": prepared["key"]})["seq"]}
                 for repo in prepared["repos"]]
        pong = c.call("ping")
    out = {"key": prepared["key"], "repos": moved, "daemon_key": pong["daemon_key"], "next_key": pong["next_key"]}
    if args.json:
        emit_json(out)
    else:
        for m in moved:
            print(f"{paint('allow', '32')}  {m['repo']}: signed with daemon key {prepared['key'][:16]}… from seq {m['seq'] + 1}")
        print("the rotation is complete" if pong["next_key"] is None else
              "other humans' repositories are still on the old key: each of them runs this too")
    return OK


def cmd_revoke_session(args) -> int:
    name = human_name(args)
    with Client() as c:
        repo = pick_repo(c, name, args.repo)
        res = human_submit(c, name, repo, {"op": "cap.revoke", "session": args.session, "reason": args.reason})
    out = {"repo": repo, "seq": res["seq"], "sessions_ended": res["sessions_ended"]}
    if args.json:
        emit_json(out)
    else:
        print(f"{paint('allow', '32')}  {repo}: ended {', '.join(res['sessions_ended'])} (seq {res['seq']})")
    return OK
