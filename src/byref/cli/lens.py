"""`byref lens PATH`: serve a read-only page over a run directory and print its URL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `lens` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "lens", help="see a run in a browser: what stayed out of the context, and where refs went",
        description="Start a local read-only web page over a run directory (as `byref demo "
        "--out DIR` writes it: transcript.jsonl, trace.jsonl, store/) and print its URL.",
    )
    parser.add_argument("path", type=Path, help="the run directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this Host (e.g. a proxy's name); by "
                        "default only the address listened on (and, on loopback, localhost)")
    parser.add_argument("--store", default=None, metavar="URL",
                        help="read artifacts from this store URL instead of PATH/store")
    parser.add_argument("--scope", action="append", default=None, metavar="T/P/C",
                        help="tenant/principal/conversation to read (default: the trace's)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref lens`: serve a read-only web page over a run directory and print its URL; returns
    the exit code."""
    from byref.lens import Lens, RunDirectoryError, load_run, make_server, url_of
    from byref.lens.run import parse_scope
    from byref.store import open_store

    scopes = None
    if args.scope is not None:
        scopes = [parse_scope(s) for s in args.scope]
        if any(s is None for s in scopes):
            print("byref lens: --scope takes tenant/principal/conversation, e.g. "
                  "demo/default/1f2e…", file=sys.stderr)
            return 2
    store = open_store(args.store) if args.store else None
    try:
        lens = Lens(load_run(args.path, store=store,
                             scopes=[s for s in scopes if s is not None] if scopes else None))
    except RunDirectoryError as exc:
        print(f"byref lens: {exc}", file=sys.stderr)
        return 2
    try:
        server = make_server(lens, args.host, args.port, allow_hosts=args.allow_host)
    except OSError as exc:
        print(f"byref lens: cannot listen on {args.host}:{args.port}: {exc.strerror}",
              file=sys.stderr)
        return 2
    print(f"byref lens: {url_of(server)}  (read-only; Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
