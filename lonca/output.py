"""What the CLI prints and how it exits (seed 001, "CLI for runners"): one JSON value on stdout with
--json and nothing else there; `code: message` on stderr for a refusal; colour only on a terminal
without NO_COLOR or TERM=dumb."""
import json
import os
import sys

OK, REFUSED, UNREACHABLE, USAGE = 0, 1, 2, 3


class Usage(Exception):
    """Everything that never reached the daemon: exit 3."""


def colour_on() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, code: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour_on() else text


def emit_json(value, pretty: bool = False) -> None:
    sys.stdout.write(json.dumps(value, indent=2 if pretty else None, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def fail(code: str, message: str) -> None:
    sys.stderr.write(f"{code}: {message}\n")


def decision_exit(decision: dict | None) -> int:
    """A logged decision with outcome deny exits 1 with its reasons on stderr."""
    if decision and decision.get("outcome") == "deny":
        fail("denied", ", ".join(decision.get("reasons", [])) or "denied")
        return REFUSED
    return OK


def command(group, name: str, help: str, run, *, repo: bool = False, human: bool = False,
            json_help: str | None = None):
    """A subcommand of `group` that runs `run` and answers in JSON with --json; `repo` and
    `human` add the --repo and --human every command that acts for a human takes."""
    p = group.add_parser(name, help=help)
    if repo:
        p.add_argument("--repo", help="the repository (default: your only one)")
    if human or repo:
        p.add_argument("--human", help="your human name (default: $LONCA_HUMAN or your login)")
    p.add_argument("--json", action="store_true", help=json_help or "answer in JSON")
    p.set_defaults(run=run)
    return p
