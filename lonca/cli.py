"""`lonca`: the one command. Commands that start the worker or the console import them inside
the command; everything else speaks to the worker through `lonca.client`.

`lonca hook` runs before every tool call of every agent in a harness, so it builds a parser of
its own command only: importing every command module (keys, audit, workspaces) cost it about
60 ms a call (bench hook)."""
import argparse
import sys

import lonca
from lonca import harness
from lonca.client import Unreachable
from lonca.lonis_blocks import MODES
from lonca.output import REFUSED, UNREACHABLE, USAGE, Usage, fail
from lonca.protocol import LoncaError


class Parser(argparse.ArgumentParser):
    """argparse with the seed's exit code for a usage error: 3. argparse's own 2 is the seed's
    "daemon unreachable", which a harness would retry. Subcommands' parsers are of this class too."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    p = Parser(prog="lonca", description="Symbol leases and a merge queue for AI coding agents, with human review.")
    p.add_argument("--version", action="version", version=f"lonca {lonca.__version__}")
    p.add_argument("--mode", choices=MODES, help="output of the Lonis provider commands (default json: blocks)")
    return p, p.add_subparsers(dest="command", metavar="COMMAND")


def hook_parser() -> argparse.ArgumentParser:
    """The parser of `lonca hook` alone (the hook's start-up, above)."""
    p, sub = _parser()
    harness.register_hook(sub)
    return p


def build_parser() -> argparse.ArgumentParser:
    from lonca import admin_commands, bridge_commands, console_commands, lonis, mcp_bridge, policy_commands, runner_commands
    p, sub = _parser()
    admin_commands.register(sub)
    bridge_commands.register(sub)
    policy_commands.register(sub)
    console_commands.register(sub)
    runner_commands.register(sub)
    harness.register(sub)
    mcp_bridge.register(sub)
    lonis.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = hook_parser() if argv[:1] == ["hook"] else build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return USAGE
    try:
        return args.run(args)
    except Usage as e:
        fail("usage", str(e))
        return USAGE
    except Unreachable as e:
        fail("unreachable", str(e))
        return UNREACHABLE
    except LoncaError as e:
        fail(e.code, e.message)
        return REFUSED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
