"""`byref store …`: run the conformance battery against any store URL, and operator verbs.

    byref store check URL [--json]          the battery's report; exit 1 unless every case passes
                                            or is declared with a reason
    byref store ls URL --tenant T [--principal P] [--conversation C] [--kind K] [--limit N]
    byref store head URL REF --tenant T …   byref store get URL REF --tenant T … [-o FILE]
    byref store rm URL REF --tenant T …

The law: the command answers the port's own answers (one absence: "not available", never which of
the four causes), every listing has `--json`, and errors name the fix on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from byref.cli.progress import progress
from byref.store import (
    ArtifactError,
    ArtifactNotFoundError,
    ArtifactStore,
    Scope,
    can_get_stream,
    open_store,
)


def register(subparsers: Any) -> None:
    """Add the `store` command to the CLI's subparsers."""
    parser = subparsers.add_parser("store", help="check and inspect an artifact store")
    sub = parser.add_subparsers(dest="store_command", required=True)

    check = sub.add_parser("check", help="run the conformance battery against a store URL")
    check.add_argument("url", help="e.g. memory://, file://.byref, sqlite:///a.db, s3://b/p")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(run=_guard(_check))

    ls = sub.add_parser("ls", help="list a scope's artifacts, newest first")
    _scoped(ls)
    ls.add_argument("--kind")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--cursor")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=_guard(_ls))

    for name, fn, helptext in (("head", _head, "describe one artifact"),
                               ("get", _get, "write one artifact's bytes"),
                               ("rm", _rm, "delete one artifact")):
        verb = sub.add_parser(name, help=helptext)
        _scoped(verb)
        verb.add_argument("ref")
        if name == "head":
            verb.add_argument("--json", action="store_true")
        if name == "get":
            verb.add_argument("-o", "--output", help="file to write (default: standard output)")
        verb.set_defaults(run=_guard(fn))


def _scoped(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="store URL, e.g. file://.byref")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--principal", default="default")
    parser.add_argument("--conversation", default="default")


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (ArtifactError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _open(args: argparse.Namespace) -> tuple[ArtifactStore, Scope]:
    return open_store(args.url), Scope(args.tenant, args.principal, args.conversation)


def _check(args: argparse.Namespace) -> int:
    from byref.store.conformance.runner import (
        CASES,
        battery_for_url,
        format_report,
        run_conformance,
    )

    harness = battery_for_url(args.url)
    with progress(f"checking {args.url}", len(CASES)) as advance:
        report = run_conformance(harness, on_result=lambda _: advance(1))
    if args.json:
        print(msgspec.json.encode(report.to_json()).decode())
    else:
        print(format_report(report))
    return 0 if report.ok else 1


def _ls(args: argparse.Namespace) -> int:
    store, scope = _open(args)
    try:
        page = store.list(scope, args.kind, cursor=args.cursor, limit=args.limit)
    finally:
        store.close()
    if args.json:
        out = {"items": [m.to_json() for m in page], "nextCursor": page.next_cursor}
        print(msgspec.json.encode(out).decode())
        return 0
    for m in page:
        print(f"{m.ref}  {m.bytes:>12,}  {m.kind:<24} {m.label or ''}")
    if not page and args.cursor is None:
        # Artifacts live per conversation; an empty answer must not read as "the store is empty".
        kind = f" of kind {args.kind!r}" if args.kind else ""
        print(f"byref store ls: no artifacts{kind} in tenant {scope.tenant!r}, principal "
              f"{scope.principal!r}, conversation {scope.conversation!r}. Artifacts are kept "
              "per conversation: pass the --conversation (and --principal) that stored them; a "
              "run's event trace names its scope (byref demo: byref-demo/trace.jsonl).",
              file=sys.stderr)
    if page.next_cursor:
        print(f"(more: --cursor {page.next_cursor})")
    return 0


def _head(args: argparse.Namespace) -> int:
    store, scope = _open(args)
    try:
        meta = store.head(scope, args.ref)
    finally:
        store.close()
    if meta is None:
        print(ArtifactNotFoundError(args.ref), file=sys.stderr)
        return 1
    if args.json:
        print(msgspec.json.encode(meta.to_json()).decode())
    else:
        for key, value in meta.to_json().items():
            print(f"{key:11} {value}")
    return 0


def _get(args: argparse.Namespace) -> int:
    store, scope = _open(args)
    try:
        if can_get_stream(store):
            streamed = store.get_stream(scope, args.ref)
            chunks = None if streamed is None else streamed.chunks
        else:
            artifact = store.get(scope, args.ref)
            chunks = None if artifact is None else iter([artifact.data])
        if chunks is None:
            print(ArtifactNotFoundError(args.ref), file=sys.stderr)
            return 1
        sink = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115
        try:
            for chunk in chunks:
                sink.write(chunk)
        except BaseException:
            # A stream that fails its integrity check must not leave a plausible partial file.
            if args.output:
                sink.close()
                Path(args.output).unlink(missing_ok=True)
            raise
        finally:
            if args.output:
                sink.close()
            else:
                sink.flush()
    finally:
        store.close()
    return 0


def _rm(args: argparse.Namespace) -> int:
    store, scope = _open(args)
    try:
        gone = store.delete(scope, args.ref)
    finally:
        store.close()
    print("deleted" if gone else "nothing to delete (missing, expired or not in this scope)")
    return 0
