"""`byref lens [PATH]`: serve a read-only page over a run directory, or over the conversations a
store holds, and print its URL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

STATE_FILE = "state.db"
"""The conversation state a gateway keeps beside a file store (`default_state_url`)."""


def register(sub: Any) -> None:
    """Add the `lens` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "lens", help="see a run in a browser: what stayed out of the context, and where refs went",
        description="Start a local read-only web page over a run directory (as `byref demo "
        "--out DIR` writes it: transcript.jsonl, trace.jsonl, store/), or over the "
        "conversations a gateway's store holds (PATH its file store, or --store URL), and print "
        "its URL.",
    )
    parser.add_argument("path", type=Path, nargs="?", default=None,
                        help="a run directory, or a gateway's file store directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this Host (e.g. a proxy's name); by "
                        "default only the address listened on (and, on loopback, localhost)")
    parser.add_argument("--store", default=None, metavar="URL",
                        help="read artifacts from this store URL (instead of PATH/store); "
                        "without a run directory, show the conversations it holds")
    parser.add_argument("--state", default=None, metavar="URL",
                        help="the conversation state to read (default: the one beside the "
                        "store, as the gateway keeps it)")
    parser.add_argument("--conversation", default=None, metavar="ID",
                        help="show this stored conversation (its id, or tenant/principal/id)")
    parser.add_argument("--scope", action="append", default=None, metavar="T/P/C",
                        help="tenant/principal/conversation to read (default: the trace's)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref lens`: serve a read-only web page and print its URL; returns the exit code."""
    from byref.lens import make_server, url_of

    try:
        pages = _pages(args)
    except _Refused as exc:
        print(f"byref lens: {exc}", file=sys.stderr)
        return 2
    try:
        server = make_server(pages, args.host, args.port, allow_hosts=args.allow_host)
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


class _Refused(Exception):
    """What to tell the user instead of serving."""


def _pages(args: argparse.Namespace) -> Any:
    from byref.lens import Lens, RunDirectoryError, load_run
    from byref.lens.reading.run import TRANSCRIPT, parse_scope
    from byref.store import open_store

    path: Path | None = args.path
    is_run = path is not None and (path / TRANSCRIPT).is_file()
    if is_run or (path is not None and not (path / STATE_FILE).is_file()
                  and args.store is None and args.state is None):
        scopes = None
        if args.scope is not None:
            scopes = [parse_scope(s) for s in args.scope]
            if any(s is None for s in scopes):
                raise _Refused("--scope takes tenant/principal/conversation, e.g. "
                               "demo/default/1f2e…")
        store = open_store(args.store) if args.store else None
        try:
            return Lens(load_run(path or Path("."), store=store,
                                 scopes=[s for s in scopes if s is not None] if scopes else None))
        except RunDirectoryError as exc:
            raise _Refused(f"{exc} Or pass a gateway's store: byref lens --store URL "
                           "[--conversation ID].") from None
    return _stored(args, path)


def _stored(args: argparse.Namespace, path: Path | None) -> Any:
    """The lens over the conversations a store holds (a gateway's file store directory, or
    --store / --state URLs)."""
    from byref.conversations import StateURLError, default_state_url, open_state
    from byref.lens.serving.stored import StoreLens, find_conversation
    from byref.store import open_store

    store_url = args.store or (f"file://{path.resolve()}" if path is not None else None)
    state_url = args.state or default_state_url(store_url)
    if state_url.startswith("memory:"):
        raise _Refused(f"No conversation state to read beside {store_url or 'no store'}: a "
                       "gateway keeps conversations in state.db beside a file store, else in "
                       "its configured byref.state (pass it as --state URL).")
    if state_url.startswith("sqlite:///"):
        db = Path(state_url.removeprefix("sqlite:///").split("?")[0])
        if not db.is_file():  # opening would create it: a reader never does
            raise _Refused(f"No conversation state at {str(db)!r} (a gateway writes it there "
                           "once a call is made); pass --state URL if it keeps it elsewhere.")
    try:
        state = open_state(state_url, ttl=None)
    except (StateURLError, ValueError, OSError) as exc:
        raise _Refused(str(exc)) from None
    store = open_store(store_url) if store_url else None
    only = None
    if args.conversation is not None:
        found = find_conversation(state, args.conversation)
        if isinstance(found, str):
            raise _Refused(found)
        only = found
    return StoreLens(state, store, source=store_url or state_url, only=only)
