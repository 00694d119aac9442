"""The `byref` command. Each subcommand lives in its own module and registers itself here.

Every listing takes `--json`; long work shows a progress bar on a terminal and stays quiet in pipes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType

# Modules that define `register(subparsers)`; a missing optional one is skipped, not fatal.
_COMMANDS = ("byref.cli.demo", "byref.cli.bench", "byref.cli.eval", "byref.cli.store",
             "byref.cli.tools", "byref.cli.trace", "byref.cli.gateway", "byref.cli.hookup",
             "byref.cli.lens", "byref.cli.conformance")


_ALONE = {"gateway": "byref.cli.gateway"}
"""Commands parsed with their own module only: `byref gateway` answers its client's first request
before the rest of byref is imported (`byref.gateway.wire.front`), and every command module
imports some of it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `byref` argument parser, with every command module's subcommands (or, for a command
    in `_ALONE`, that one's)."""
    parser = argparse.ArgumentParser(
        prog="byref",
        description="The model routes references; the bytes stay below the context boundary.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    for module in plugins((_ALONE[command],) if command in _ALONE else _COMMANDS):
        module.register(sub)
    _name_choices(parser)
    return parser


def _version() -> str:
    from byref import __version__

    return f"byref {__version__} (Python {sys.version.split()[0]}, {sys.executable})"


def _name_choices(parser: argparse.ArgumentParser) -> None:
    """Every level of subcommands names its choices where a command is missing: argparse would
    otherwise print its internal `dest` ("required: store_command")."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if action.metavar is None:
                action.metavar = "{" + ",".join(action.choices) + "}"
            for child in action.choices.values():
                _name_choices(child)


def plugins(names: Sequence[str]) -> Iterator[ModuleType]:
    """Import each named module that exists; a missing one is skipped, a broken one raises."""
    for name in names:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `byref` command line with `argv` (default: sys.argv); returns the exit code, 2 for
    any byref error (a store that cannot be opened, a bad config, a missing extra…)."""
    from byref.errors import ByrefError

    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(given[0] if given else None).parse_args(given)
    try:
        code: int = args.run(args)
    except ByrefError as exc:
        # One place turns every error byref raises on purpose into one line (errors.py's law).
        print(f"byref {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
