"""`byref gateway --config FILE [--transport stdio|http] [--store URL]`: serve MCP servers by ref.

The config is the `mcpServers` JSON MCP clients already use (see byref.gateway.config.file). Over
stdio the gateway speaks MCP on stdin/stdout (put the command in your MCP client's config); over
HTTP it listens on --host/--port (0 picks a free port; the address is printed on stderr) and needs
the config's byref.tokens. Conversations (the records Message refs address) are kept by
--state (default: SQLite beside a file store, else memory); over stdio --conversation ID resumes
one, and a second stdio gateway on a conversation another one holds is refused (exit 2).
A bad config, store or state URL or address is a one-line error and exit code 2. SIGTERM, SIGINT
or SIGHUP stops it (over HTTP gracefully: requests in flight answered, open streams ended) with
exit code 0 and nothing printed, as does the end of stdin; stdin or stdout on /dev/null, a file or
closed is served as a pipe is.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

EPILOG = """\
transports:
  stdio (default)   one client starts the gateway itself; no token
  http              every request needs "Authorization: Bearer <token>": byref.tokens maps each
                    token to a tenant and principal, e.g.
                    "byref": {"tokens": {"<long random token>": {"tenant": "acme",
                                                                 "principal": "alice"}}}
                    or byref.jwt checks your identity provider's JWTs; with neither, it refuses
                    to start

the config's byref block (every key optional; [default]):
  mode      "search" [default]: the client sees search_tools, activate_tool, call_tool,
            read_result and present, and tools as it activates them; "direct": every upstream
            tool declared from the start (clients that defer tools themselves). Claude Code
            works with either.
  timeout   seconds a server may take to start, and to answer one call [60]
  store     where results too large for the context are kept [memory://; file://.byref keeps
            them across restarts]
  state     conversation state [SQLite beside a file store, else memory://]
  usage     a log of searches that ended in an activation, which search learns from [none]
  tokens, jwt, callTool, codeMode, alwaysLoad, search, workingSet, autoInsertBytes, ...:
            docs/GATEWAY.md and docs/TEAM.md

Relative paths in the config are taken from the config file's folder; on the command line,
from the working directory. Try it: byref gateway --config examples/gateway.json (in the clone).
"""


def register(sub: Any) -> None:
    """Add the `gateway` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "gateway", help="serve your MCP servers through one: search instead of declaration, "
        "results by reference",
        description="Put byref in front of the MCP servers in FILE (the mcpServers JSON your MCP "
        "client already uses). The client sees search_tools, activate_tool, call_tool, "
        "read_result and present, plus the tools it activates (read_json and query_json once a "
        "stored result needs them).", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="mcpServers JSON, optionally with a byref block")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--store", default=None, metavar="URL",
                        help="artifact store URL (default: the config's byref.store, else "
                        "memory://); e.g. file://.byref")
    parser.add_argument("--scope", default=None,
                        help="the stdio scope's id (default: the config's byref.scope, else "
                        "'local')")
    parser.add_argument("--conversation", default=None, metavar="ID",
                        help="stdio: resume conversation ID (its Message refs resolve again); "
                        "default: a new conversation")
    parser.add_argument("--state", default=None, metavar="URL",
                        help="conversation state URL (default: the config's byref.state, else "
                        "SQLite beside a file store, else memory://); e.g. "
                        "postgresql://host/db")
    parser.add_argument("--trace", default=None, metavar="FILE",
                        help="append the typed event trace (placed, refused, …) to FILE as JSON "
                        "lines")
    parser.add_argument("--otel", default=None, metavar="FILE",
                        help="append OpenTelemetry spans to FILE as JSON lines (needs "
                        "byref[otel])")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on")
    parser.add_argument("--port", type=int, default=8848, help="HTTP: port (0: any free port)")
    parser.add_argument("--sdk-paths-only", action="store_true",
                        help="serve every request through the MCP SDK's own paths (no byref "
                             "lane; also BYREF_SDK_PATHS_ONLY=1)")
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                        help="event loop: uvloop when it is installed (auto, as uvicorn "
                        "chooses), else asyncio's own")
    parser.set_defaults(run=run)


def loop_options(choice: str = "auto") -> dict[str, Any]:
    """anyio's asyncio backend options for `--loop`: uvloop when asked for, or when `auto` and
    it is installed (it comes with byref[mcp] where it builds: not on Windows). Why: the loop's
    own work is a fifth of the gateway's CPU per proxied HTTP call, and a server uvicorn runs
    picks uvloop the same way."""
    if choice == "asyncio":
        return {}
    if choice == "uvloop":
        import uvloop  # noqa: F401 -- asked for by name: its absence is the error to show
        return {"use_uvloop": True}
    from importlib.util import find_spec

    return {"use_uvloop": True} if find_spec("uvloop") is not None else {}


def run(args: argparse.Namespace) -> int:
    """`byref gateway`: serve the configured MCP servers through byref until stopped; returns the
    exit code, 2 when the MCP SDK is missing."""
    import signal
    import threading
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        from byref.errors import install_hint

        print(f"byref gateway: the MCP SDK is not installed; run: {install_hint('mcp')}",
              file=sys.stderr)
        return 2
    if args.sdk_paths_only:  # the one switch (`gateway.wire.bypass`), read by both edges
        os.environ["BYREF_SDK_PATHS_ONLY"] = "1"
    _standard_streams()
    try:
        options = loop_options(args.loop)
    except ModuleNotFoundError:
        from byref.errors import install_hint

        print(f"byref gateway: --loop uvloop needs uvloop (in the mcp extra): "
              f"{install_hint('mcp')}", file=sys.stderr)
        return 2
    # The config is read before the heavy imports (light: `byref.gateway.config`), so a bad one
    # is refused before the front answers anything.
    from byref.gateway.config.file import ConfigError, load_config

    try:
        config = load_config(args.config)
        if args.scope:
            config = dataclasses.replace(config, scope=args.scope)
        if args.conversation:
            config = dataclasses.replace(config, stdio_conversation=args.conversation)
        if args.state:
            config = dataclasses.replace(config, state=args.state)
        url = args.store or config.store or "memory://"
        config = dataclasses.replace(config, store=url)  # conversation state goes beside it
    except (ConfigError, RuntimeError, OSError) as exc:
        print(f"byref gateway: {exc}", file=sys.stderr)
        return 2
    # Until the event loop listens (`_on_signals`), SIGTERM is Ctrl-C: a quiet exit.
    previous = (signal.signal(signal.SIGTERM, _interrupt)
                if threading.current_thread() is threading.main_thread() else None)
    try:
        return _serve(args, config, options)
    except KeyboardInterrupt:
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


HEAVY = ("anyio", "byref.events", "byref.store", "byref.conversations", "byref.gateway.core",
         "byref.gateway.edge.server", "byref.gateway.upstream.instance.spawn")
"""What `byref gateway` imports before it serves (on a thread while the stdio front answers)."""


def _front(args: argparse.Namespace, config: Any) -> tuple[Any, Any]:
    """(config, replay): over stdio, the first requests answered by `gateway.wire.front` while
    `HEAVY` is imported on a thread; the config then names the new conversation the front
    announced, unless it resumes one (`--conversation`, held by then: `_held`). (config, None)
    where the front does not apply: HTTP, the SDK-only switch, stdio not on pipes, no recording
    for this SDK, one conversation per principal."""
    from byref.gateway.config.file import restricts
    from byref.gateway.wire import front
    from byref.gateway.wire.bypass import lanes_on

    if (args.transport != "stdio" or not lanes_on() or config.conversation != "session"
            or not front.usable()):
        return config, None
    recorded = front.load()
    if recorded is None:
        return config, None
    import threading
    import uuid

    if config.stdio_conversation is None:  # a new one, named as `Scopes` names one
        config = dataclasses.replace(config,
                                     stdio_conversation=f"stdio-{uuid.uuid4().hex[:16]}")
    ready_r, ready_w = os.pipe()

    def load() -> None:
        import importlib

        try:
            for name in HEAVY:
                importlib.import_module(name)
        except BaseException:
            pass
        finally:
            os.write(ready_w, b"x")

    threading.Thread(target=load, name="byref-imports", daemon=True).start()
    print(f"byref gateway: {front.stdio_said(config.stdio_conversation)}", file=sys.stderr,
          flush=True)
    facts = front.Facts(config.stdio_conversation, config.auto_insert_bytes, restricts(config),
                        len(config.servers))
    try:
        replay = front.serve(front.Front(recorded, facts), ready_r)
    finally:
        os.close(ready_r)
        os.close(ready_w)
    return config, replay


def _held(config: Any) -> tuple[Any, Any]:
    """(state, hold): a resumed stdio conversation's state, held before anything is answered (a
    second gateway on it is refused with nothing answered). Raises ConversationError,
    RuntimeError or OSError."""
    from byref.gateway.access.held import open_conversations, stdio_scope

    state = open_conversations(config)
    try:
        return state, state.hold(stdio_scope(config, config.stdio_conversation))
    except BaseException:
        state.close()
        raise


def _serve(args: argparse.Namespace, config: Any, options: dict[str, Any]) -> int:
    state = held = None
    if args.transport == "stdio" and config.stdio_conversation is not None and not (
            config.replicas):  # replicas hold nothing; a new conversation no one else can
        from byref.conversations import ConversationError

        try:
            state, held = _held(config)
        except (ConversationError, RuntimeError, OSError) as exc:
            print(f"byref gateway: {exc}", file=sys.stderr)
            return 2
    try:
        return _started(args, config, options, state, held)
    finally:
        if held is not None:
            held.release()
        if state is not None:
            state.close()


def _started(args: argparse.Namespace, config: Any, options: dict[str, Any], state: Any,
             held: Any) -> int:
    config, replay = _front(args, config)
    import anyio

    from byref.conversations import ConversationError
    from byref.events import Emitter, JsonLinesSink
    from byref.gateway import Gateway, listen_socket
    from byref.gateway.edge.server import http_app, serve_http, serve_stdio
    from byref.store import StoreURLError, open_store

    try:
        emit = Emitter(JsonLinesSink(args.trace)) if args.trace else Emitter()
        store = open_store(config.store, emit=emit)
        gateway = Gateway(config, store=store, emit=emit, state=state)
        if args.otel:
            from byref.gateway.ops.telemetry import trace_to_file

            trace_to_file(args.otel)
        gateway.scopes.conversations  # noqa: B018 -- opened now: a bad state URL exits here
        # One process writes a stdio conversation: a second gateway resuming the same one is
        # refused here (replicas share records by design and hold nothing).
        if held is None and args.transport == "stdio" and not config.replicas:
            held = gateway.scopes.conversations.hold(gateway.scopes.stdio_scope)
    except (StoreURLError, ConversationError, RuntimeError, OSError) as exc:
        print(f"byref gateway: {exc}", file=sys.stderr)
        return 2
    if args.transport == "stdio" and replay is None:
        from byref.gateway.edge.server import stdio_said

        print(f"byref gateway: {stdio_said(gateway.scopes.stdio_scope.conversation)}",
              file=sys.stderr)
    sock = None
    if args.transport == "http":
        try:
            http_app(gateway, host=args.host, port=args.port)  # refuses a config without tokens
        except ValueError as exc:
            print(f"byref gateway: {exc}", file=sys.stderr)
            return 2
        try:
            sock = listen_socket(args.host, args.port)
        except OSError as exc:
            print(f"byref gateway: {listen_failure(exc, args.host, args.port)}", file=sys.stderr)
            return 2

    async def main() -> None:
        async with gateway, anyio.create_task_group() as signals:
            stopping = anyio.Event()
            await signals.start(_on_signals, stopping, signals.cancel_scope)
            async with anyio.create_task_group() as group:
                if sock is None:  # stdio: a stop is the end of stdin, said sooner
                    group.start_soon(_cancel_when, stopping, group.cancel_scope)
                    await serve_stdio(gateway, replay=replay)
                else:
                    await serve_http(gateway, sock, stop=stopping)
                group.cancel_scope.cancel()
            signals.cancel_scope.cancel()

    from byref.gateway.upstream.instance.spawn import end_all
    from byref.store.port import StoreUnavailableError

    try:
        anyio.run(main, backend_options=options)
    except KeyboardInterrupt:
        pass
    except StoreUnavailableError as exc:  # checked at start (byref.gateway.ops.health)
        print(f"byref gateway: {exc}", file=sys.stderr)
        return 2
    finally:
        end_all()  # whatever a stop could not end in time
        if sock is not None:
            sock.close()
        if held is not None:
            held.release()  # (a resumed one's again in `_serve`: releasing is idempotent)
    return 0


def listen_failure(exc: OSError, host: str, port: int) -> str:
    """Why the gateway cannot listen, naming the address (the OS names none)."""
    import errno

    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    where = f"cannot listen on {address}: {exc.strerror or exc}"
    if exc.errno == errno.EADDRINUSE:
        return (f"{where} (another process holds it; pick another --port, or --port 0 for any "
                "free one).")
    if exc.errno == errno.EACCES:
        return f"{where} (ports below 1024 need privileges; pick another --port)."
    return f"{where}."


STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
"""What stops the gateway (what Docker, systemd and Kubernetes send, Ctrl-C, a closed terminal):
every upstream's process group is ended on the way out (Python's default would exit and orphan
them); a second one stops it at once."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # a stop before the event loop listens: as Ctrl-C, a quiet exit


async def _on_signals(stopping: Any, scope: Any, *,
                      task_status: Any) -> None:
    import signal

    import anyio

    wanted = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    with anyio.open_signal_receiver(*wanted) as received:
        task_status.started()
        async for _ in received:
            if stopping.is_set():
                scope.cancel()
                return
            stopping.set()


async def _cancel_when(stopping: Any, scope: Any) -> None:
    await stopping.wait()
    scope.cancel()


def _standard_streams() -> None:
    """Give each closed standard descriptor the null device, and Python a file on it.

    Why: a closed descriptor is the first one the process opens next (the event loop's own, a
    socket), which the gateway would then serve the wire on, and uvloop aborts the process when
    it closes a descriptor below 3. Closed stdin then reads as empty (the gateway ends at once),
    closed stdout swallows what is written."""
    import os

    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115 -- for the process's life
