"""`byref conformance refs …`: the `dev.byref/refs` battery against any MCP server.

    byref conformance refs --command "python server.py" [--emit NAME] [--digest NAME] [--modern]
    byref conformance refs --url http://127.0.0.1:8848/mcp [--token-env VAR]
                           [--other-token-env VAR] [--json]

Prints one line a case (passed, failed, not-applicable, declared) and exits 1 unless none failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from typing import Any


def register(subparsers: Any) -> None:
    """Add `conformance refs` to the `byref` parser."""
    parser = subparsers.add_parser("conformance", help="run a public conformance battery")
    sub = parser.add_subparsers(dest="conformance_command", required=True)
    refs = sub.add_parser("refs", help="check an MCP server against dev.byref/refs "
                                       "(docs/extensions/refs.md)")
    where = refs.add_mutually_exclusive_group(required=True)
    where.add_argument("--command", help="the server's command line, spoken to over stdio")
    where.add_argument("--url", help="the server's streamable HTTP endpoint")
    refs.add_argument("--emit", default="emit", help="the probe tool answering `size` bytes")
    refs.add_argument("--digest", default="digest", help="the probe tool answering a sha-256")
    refs.add_argument("--modern", action="store_true", help="speak 2026-07-28 (server/discover)")
    refs.add_argument("--token-env", metavar="VAR",
                      help="with --url: the environment variable holding the bearer token")
    refs.add_argument("--other-token-env", metavar="VAR",
                      help="with --url: a second owner's token (the other-owner cases)")
    refs.add_argument("--json", action="store_true", help="print the report as JSON")
    refs.set_defaults(run=_refs)


def _refs(args: argparse.Namespace) -> int:
    import anyio

    from byref.errors import InvalidValue
    from byref.extension.conformance import (
        RefsTarget,
        format_refs_report,
        run_refs_conformance,
    )

    def token(var: str | None) -> str | None:
        if var is None:
            return None
        value = os.environ.get(var)
        if not value:
            raise InvalidValue(f"Environment variable {var!r} is not set; export the token "
                               "in it (a token is not passed on the command line).")
        return value

    command = shlex.split(args.command) if args.command else None
    target = RefsTarget(args.command or args.url, command=command, url=args.url,
                        emit=args.emit, digest=args.digest, modern=args.modern,
                        token=token(args.token_env), other_token=token(args.other_token_env))
    report = anyio.run(run_refs_conformance, target)
    print(json.dumps(report.to_json()) if args.json else format_refs_report(report))
    return 0 if report.ok else 1
