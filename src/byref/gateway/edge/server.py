"""Serving the gateway with the `mcp` SDK's low-level server, over stdio or streamable HTTP.

Owns the MCP face: `tools/list`, `tools/call` and `subscriptions/listen` handlers that find the
request's scope and hand over to `Gateway` (and, with a `prestart` server, the `initialized`
notification's, where a client has connected), and the two transports. The law: handlers convert at
the edge and nothing else (MCP types in `convert`, decisions in `core`); over HTTP the SDK's bearer
middleware refuses a request without a valid token before any handler runs, and the session a
token opened answers only that token; both protocol generations are served by the SDK's dual-era
loop, and a tool-list change reaches each (handshake-era: a notification on the connection;
2026-07-28: the scope's subscription stream). A 2026-07-28 client's lists never change with its
requests (`Toolbox.stable`) and carry cache hints (`caching`); `server/discover` is `discover`'s.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette

from byref.discovery.declaring.declare import PLAIN
from byref.extension.protocol import IDENTIFIER, declared, settings
from byref.gateway.access.bearer import BearerVerifier
from byref.gateway.access.scopes import AccessRefused, owned
from byref.gateway.access.state import ScopeState
from byref.gateway.catalog.announce import announce
from byref.gateway.catalog.convert import mcp_tool
from byref.gateway.catalog.metadata import metadata_of
from byref.gateway.catalog.toolbox import Toolbox
from byref.gateway.config.auth import JwtConfig
from byref.gateway.config.values import ConfigError
from byref.gateway.core import Gateway
from byref.gateway.edge.answer import answer_extras, client_result
from byref.gateway.edge.caching import ListHints
from byref.gateway.edge.discover import discover_handler
from byref.gateway.edge.host import install_host_methods, transfer_routes
from byref.gateway.edge.lanes.fastpath import PlainCalls
from byref.gateway.edge.lanes.stdio import StdioLane
from byref.gateway.edge.ops import ops_routes
from byref.gateway.edge.tasks import (
    EXTENSION,
    MISSING_CAPABILITY,
    TaskFailed,
    TaskParams,
    Tasks,
    UpdateParams,
    declares_tasks,
)
from byref.gateway.passthrough.handlers import Passthrough
from byref.gateway.passthrough.pages import page
from byref.gateway.upstream.modern.inputs import Parked, Parking, binding
from byref.gateway.upstream.relay import calling, may_ask
from byref.gateway.wire.bypass import lane_usable, lanes_on
from byref.gateway.wire.front import Replay
from byref.gateway.wire.front import stdio_said as stdio_said
from byref.gateway.wire.sdk_server import (
    ReadStream,
    WriteStream,
    connection_of,
    session_manager,
    session_transports,
)
from byref.gateway.wire.stdio import stdio_streams
from byref.harness import REFS_PROTOCOL
from byref.lens.serving.gateway import lens_route
from byref.transcript import Part

INSTRUCTIONS = (
    "byref gateway: many MCP servers' tools behind one connection, most not declared to you: "
    "find them with search_tools, then load them with activate_tool or run them through "
    "call_tool. " + REFS_PROTOCOL
)


class GatewayServer(Server[Any]):
    """The low-level server, advertising tool-list changes on handshake-era connections."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The SDK's options, with tool, prompt and resource list changes advertised by default,
        and the extensions mirrored under `experimental` (where a handshake-era client reads
        them: its `initialize` result has no `extensions`)."""
        return super().create_initialization_options(
            notification_options or NotificationOptions(
                tools_changed=True, prompts_changed=True, resources_changed=True),
            experimental_capabilities or (dict(self.extensions) or None), extensions)


class DeclaredSchemas:
    """Tool name → the input schema the gateway declares for it, from the latest toolbox.

    The SDK checks a 2026-07-28 HTTP `tools/call`'s `Mcp-Param-*` headers against the called
    tool's input schema; without this lookup it finds that schema by running the whole
    `tools/list` handler (and serializing its answer) before every call. The lookup answers as
    `MCPServer`'s own does: by name, not scoped to the caller, None for a name it does not know
    (nothing to validate). The toolbox is the one the last HTTP request saw (stdio needs none),
    so the first request a gateway serves is checked against none; a schema is the very object
    the listing declares.
    """

    def __init__(self) -> None:
        self._box: Toolbox | None = None
        self._scaffolding: dict[str, dict[str, Any]] = {}

    def seen(self, box: Toolbox) -> Toolbox:
        """Remember `box` as the latest toolbox (its scaffolding schemas recomputed when it
        changed); returns it."""
        if box is not self._box:
            self._box = box
            self._scaffolding = {t.name: _declared(t) for t in box.scaffolding}
        return box

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        """The input schema declared for tool `name`, or None when no toolbox has it."""
        box = self._box
        if box is None:
            return None
        found = self._scaffolding.get(name)
        if found is None and name in box.catalog:
            found = _declared(box.catalog.tool(name))
        return found


def _declared(tool: Any) -> dict[str, Any]:
    # As `byref.discovery.declaring.declare.assemble` declares it (the declaration object is
    # cached).
    declaration = tool.plain_declaration() if tool.name in PLAIN else tool.declaration()
    schema: dict[str, Any] = declaration["input_schema"]
    return schema


def build_server(gateway: Gateway, *, lanes: bool = True) -> GatewayServer:
    """The MCP server for a running gateway (`lanes=False`: no bypass, every request through the
    SDK's own paths)."""
    lanes = lanes_on(lanes)
    schemas = DeclaredSchemas()

    def scope_of(ctx: ServerRequestContext[Any, Any]) -> ScopeState:
        try:
            return gateway.scopes.for_request(ctx.request, connection_of(ctx))
        except AccessRefused as exc:
            raise MCPError(types.INVALID_REQUEST, str(exc)) from None

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        state = scope_of(ctx)
        connection = connection_of(ctx)
        if connection is not None:
            state.remember(connection)
        p.seen(ctx)  # told of resource and prompt list changes too
        gateway.prestart(state, "list")
        stable = stable_lists(ctx)
        # Under the request's mark: an upstream listed now runs as (and asks) this client.
        with calling(ctx, owner=state.scope):
            if ctx.request is not None:  # over HTTP: the header check's lookup needs the toolbox
                schemas.seen(await gateway.toolbox(gateway.list_wait(state, stable=stable)))
            declarations = await gateway.declarations(state, stable=stable)
        tools, cursor = page([mcp_tool(d) for d in declarations], params.cursor if params else None)
        return hints.apply(ctx, types.ListToolsResult(tools=tools, next_cursor=cursor))

    async def run_call(ctx: ServerRequestContext[Any, Any], name: str,
                       arguments: dict[str, Any]) -> Part:
        # The whole call but its answer: the handler's path and the plain one (`fastpath`).
        state = scope_of(ctx)
        with calling(ctx, owner=state.scope) as caller:  # what the upstream asks or says reaches it
            box = await gateway.toolbox()
            if ctx.request is not None:
                schemas.seen(box)
            tasks_required(ctx, box, name)
            part = await gateway.call(state, own_name(box, name), arguments,
                                      connection=connection_of(ctx), stable=stable_lists(ctx))
        if part.is_error and caller.missing:
            raise caller.refusal()
        return part

    async def extras(ctx: ServerRequestContext[Any, Any], part: Part
                     ) -> tuple[list[types.ContentBlock], Any] | None:
        return await answer_extras(gateway.passed, gateway.store, scope_of(ctx).store_scope, part)

    async def announced(ctx: ServerRequestContext[Any, Any], part: Part) -> dict[str, Any] | None:
        # `dev.byref/refs`: the result's refs in `_meta`, for a client that declared it alone.
        connection = connection_of(ctx)
        if not declared(ctx.meta, None if connection is None else connection.client_capabilities):
            return None
        state = scope_of(ctx)
        return {IDENTIFIER: await announce(gateway.store, state.store_scope, part,
                                           state.transcript.next_seq - 1)}

    async def answered(ctx: ServerRequestContext[Any, Any], part: Part,
                       scope: Any) -> types.CallToolResult:
        result = await client_result(gateway.passed, gateway.store, scope, part)
        extra = await announced(ctx, part)
        if extra is not None:
            result.meta = {**(result.meta or {}), **extra}
        return result

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
                        ) -> Any:
        if declares_tasks(ctx):  # not done within `byref.tasks.after`: a task (`tasks`)
            return await tasks.call(ctx, lambda: answer_call(ctx, params, as_task=True),
                                    tool=params.name[:200])
        return await answer_call(ctx, params)

    def settled(part: Part, result: types.CallToolResult, as_task: bool
                ) -> types.CallToolResult:
        # An upstream's protocol error (not its tool error) fails a task (`tasks.TaskFailed`).
        if as_task and part.is_error and part.reason == "upstream-failed":
            words = "".join(b.text for b in result.content if isinstance(b, types.TextContent))
            raise TaskFailed(result, {"code": types.INTERNAL_ERROR, "message": words})
        return result

    async def answer_call(ctx: ServerRequestContext[Any, Any],
                          params: types.CallToolRequestParams, *, as_task: bool = False
                          ) -> types.CallToolResult | types.InputRequiredResult:
        state = scope_of(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and may_ask(ctx):
            with calling(ctx, owner=state.scope):
                box = await gateway.toolbox()
            if ctx.request is not None:
                schemas.seen(box)
            tasks_required(ctx, box, params.name)
            name = own_name(box, params.name)

            # A 2026-07-28 client is asked by InputRequiredResult: the call runs parked (`inputs`).
            async def run(parked: Parked) -> types.CallToolResult:
                with calling(ctx, parked, owner=state.scope) as caller:
                    part = await gateway.call(state, name, params.arguments or {},
                                              connection=connection_of(ctx), stable=True)
                if part.is_error and caller.missing:
                    raise caller.refusal()
                return settled(part, await answered(ctx, part, state.store_scope), as_task)

            answer: types.CallToolResult | types.InputRequiredResult = await parking.call(
                state, params.request_state, params.input_responses, run,
                call=binding("tools/call", params), task=as_task)
            return answer
        part = await run_call(ctx, params.name, params.arguments or {})
        return settled(part, await answered(ctx, part, state.store_scope), as_task)

    async def listen(ctx: ServerRequestContext[Any, Any],
                     params: types.SubscriptionsListenRequestParams
                     ) -> types.SubscriptionsListenResult:
        state = scope_of(ctx)
        async with p.listening(ctx, params):  # its resource URIs are watched upstream meanwhile
            return await state.listen(ctx, params)

    from byref import __version__

    parking = Parking()
    config = gateway.config
    tasks = Tasks(lambda: gateway.scopes.conversations.tasks, scope_of,
                  after=config.tasks_after, ttl_ms=config.tasks_ttl_ms,
                  poll_ms=config.tasks_poll_ms, parking=parking, emit=gateway.emit)
    if gateway.metrics is not None:
        gateway.metrics.tasks_running.set_function(lambda: tasks.running_here)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        async with parking.running() as kept, tasks.running():
            yield kept
    hints = ListHints(gateway.config, gateway.indexed, lambda ctx: scope_of(ctx).grant,
                      tools=lambda: [u.tools_hint() for u in gateway.upstreams.upstreams.values()])
    p = Passthrough(lambda: gateway.upstreams.upstreams, gateway.scopes.all, parking=parking,
                    owner=scope_of, store=gateway.store)
    with warnings.catch_warnings():  # logging and roots: deprecated for 2026-07-28 only
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = GatewayServer(
            "byref-gateway", version=__version__, instructions=INSTRUCTIONS,
            lifespan=lifespan,
            on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=listen,
            get_tool_input_schema=schemas,
            on_list_resources=hints.around(p.list_resources, data=True),
            on_list_resource_templates=hints.around(p.list_templates),
            on_read_resource=p.read_resource,
            on_subscribe_resource=p.subscribe, on_unsubscribe_resource=p.unsubscribe,
            on_list_prompts=hints.around(p.list_prompts), on_get_prompt=p.get_prompt,
            on_completion=p.complete, on_set_logging_level=p.set_level,
            on_roots_list_changed=p.roots_changed)
    server.extensions[IDENTIFIER] = settings(inline_bytes=gateway.policy.auto_insert_bytes)
    server.add_request_handler("server/discover", types.RequestParams,
                               discover_handler(server, gateway, scope_of))
    if gateway.prestarts:  # a handshake-era client has connected: its instances may start
        async def initialized(ctx: ServerRequestContext[Any, Any],
                              _: types.NotificationParams) -> None:
            gateway.prestart(scope_of(ctx), "connect")

        server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                        initialized)
    server.extensions[EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, tasks.get)
    server.add_request_handler("tasks/cancel", TaskParams, tasks.cancel)
    server.add_request_handler("tasks/update", UpdateParams, tasks.update)
    server.tasks = tasks  # type: ignore[attr-defined]
    install_host_methods(server, gateway, scope_of)  # `dev.byref/refs`'s, for a client host
    # Inside the SDK's OpenTelemetry span (its first middleware): a plain call is traced too.
    if lanes:
        server.middleware.append(PlainCalls(server, run_call, extras, connection_of, announced))
    return server


def stable_lists(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's client must see lists that never change with its requests: a
    2026-07-28 one (`MUST NOT vary per-connection or as a side effect of other requests`)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def tasks_required(ctx: ServerRequestContext[Any, Any], box: Toolbox, name: str) -> None:
    """Refuse (-32021) a 2026-07-28 call of a tool its server runs only as a task, from a request
    that did not declare the tasks extension (a handshake-era one is answered inline)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not declares_tasks(ctx) and \
            task_support(box, name) == "required":
        raise MCPError(MISSING_CAPABILITY, (
            f"Tool {name[:80]!r} runs only as a task: declare the {EXTENSION} extension in "
            "this request's io.modelcontextprotocol/clientCapabilities."),
            {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def task_support(box: Toolbox, name: str) -> str | None:
    """The `execution.taskSupport` the server of tool `name` (as the client names it) lists."""
    name = own_name(box, name)
    if name not in box.catalog:
        return None
    execution = metadata_of(box.catalog.tool(name)).get("execution") or {}
    found = execution.get("taskSupport")
    return found if isinstance(found, str) else None


def own_name(box: Toolbox, name: str) -> str:
    """The catalog name for a call: as given, or the one tool a server lists under `name`.

    A client written against a server names its tools as that server does; behind the gateway
    such a name still runs that tool when exactly one server lists it (else the call goes on as
    named and is refused with the catalog's names).
    """
    if name in box.catalog or any(t.name == name for t in box.scaffolding):
        return name
    found = [e.tool.name for e in box.catalog if e.server is not None and e.original_name == name]
    return found[0] if len(found) == 1 else name


async def serve_stdio(gateway: Gateway, *, lane: bool = True, replay: Replay | None = None
                      ) -> None:
    """Serve one client on this process's stdin/stdout until it disconnects (reads and writes on
    the event loop: `wire.stdio`; `lane=False`: every request through the SDK's loop; `replay`:
    what `wire.front` read and answered before, served first)."""
    async with stdio_streams(replay) as (read, write):
        await serve_streams(gateway, read, write, lane=lane)


async def serve_streams(gateway: Gateway, read: ReadStream[SessionMessage | Exception],
                        write: WriteStream[SessionMessage], *, lane: bool = True) -> None:
    """Serve one client on a stream pair; on byref's own stdio streams a plain call takes the
    lane (`lanes/stdio`; `lane=False` serves every request through the SDK's loop)."""
    server = build_server(gateway)
    # Which conversation this is (a Message ref needs it): in `serverInfo`, both eras.
    server.description = f"byref gateway, {stdio_said(gateway.scopes.stdio_scope.conversation)}"
    options = server.create_initialization_options()
    fast = StdioLane.attach(server, read, write) if lane else None
    if fast is None:
        await server.run(read, write, options)
    else:
        await fast.run(lambda: server.run(read, write, options))


def http_app(gateway: Gateway, *, host: str = "127.0.0.1", port: int = 8848,
             path: str = "/mcp", lane: bool = True) -> Starlette:
    """The streamable HTTP app: bearer tokens from the config, refused before any handler.

    A request is answered with one JSON body (`json_response`), not an SSE stream: the handlers
    send nothing on a request's own channel before its answer (a tool-list change reaches a
    handshake-era client on its standing GET stream, a 2026-07-28 one on `subscriptions/listen`,
    which the SDK always streams), and a stream per request costs the gateway ~15% of its time;
    a 2026-07-28 request that opted in to logs or progress is streamed (`lanes/streamed`).
    A plain 2026-07-28 call is answered at the app's edge, after the bearer check, by
    `lanes/http` (`lane=False`: every request through the SDK's stack).
    """
    if not gateway.config.tokens and gateway.config.jwt is None:
        raise ConfigError(
            f"Config {gateway.config.source!r} has no byref.tokens: over HTTP every request needs "
            "a bearer token mapped to a tenant and principal, e.g. \"byref\": {\"tokens\": "
            "{\"<long random token>\": {\"tenant\": \"acme\", \"principal\": \"alice\"}}}.")
    server = build_server(gateway)
    base = f"http://{_url_host(host)}:{port}"
    security = loopback_security(host)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, json_response=True, transport_security=security,
        stateless_http=gateway.config.replicas,  # replicas: any request, any replica
        auth=auth_settings(gateway.config.jwt, f"{base}{path}"),
        token_verifier=BearerVerifier(gateway.config.tokens, gateway.config.jwt,
                                      spawn=gateway.start_soon),
        # The lens at /lens: the caller's own conversations, behind the same bearer check.
        custom_starlette_routes=[lens_route(gateway.scopes.all, gateway.store,
                                            security=security,
                                            kept=lambda: gateway.scopes.conversations,
                                            kept_artifacts=lambda t, p: owned(t, p, None)),
                                 *transfer_routes(gateway),  # dev.byref/refs URLs
                                 *ops_routes(gateway)],  # /healthz /readyz /metrics
    )
    app.state.mcp_server = server  # a graceful stop ends its sessions' streams (`serve_http`)
    manager = session_manager(server)
    # A 2026-07-28 request that opted in to logs or progress is streamed (`lanes.streamed`).
    if isinstance(manager, StreamableHTTPSessionManager) and lane_usable("http"):
        from byref.gateway.edge.lanes.streamed import stream_opted

        stream_opted(manager)
    if lanes_on(lane) and lane_usable("http"):
        from byref.gateway.edge.lanes.http import HttpLane

        HttpLane.install(app, server, path)
    return app


def auth_settings(jwt: JwtConfig | None, resource: str) -> AuthSettings:
    """What a request without a valid token is told. With a JWT issuer that is a URL: a 401
    with `WWW-Authenticate: Bearer ..., resource_metadata="<base>/.well-known/oauth-protected-
    resource<path>"` (RFC 9728), that document served naming the issuer as the authorization
    server, so a client asks it for a token. Otherwise there is no authorization server to name
    (static tokens are handed out, not issued): a plain `Bearer` 401 and no document, so a
    client asks for a token instead of failing at the discovery of a server that does not exist.
    Tokens are checked by the verifier itself (static or JWT), not by resource."""
    issuer = jwt.issuer if jwt is not None else ""
    if issuer.startswith(("https://", "http://")):
        return AuthSettings(issuer_url=issuer,  # type: ignore[arg-type]
                            resource_server_url=resource,  # type: ignore[arg-type]
                            validate_token_resource=False)
    # `issuer_url` is required by the model and unused: no authorization routes are served
    # (no provider) and none is advertised (no resource_server_url).
    return AuthSettings(issuer_url=resource,  # type: ignore[arg-type]
                        resource_server_url=None, validate_token_resource=False)


def loopback_security(host: str) -> TransportSecuritySettings | None:
    """On a loopback address, the hosts and origins the MCP route and `/lens` answer (the SDK's
    own DNS-rebinding defaults, made here so both routes share them); None elsewhere."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])


def listen_socket(host: str = "127.0.0.1", port: int = 8848) -> socket.socket:
    """A listening TCP socket (port 0 picks a free one); connections queue until served.

    Created as IPPROTO_TCP, not protocol 0: asyncio sets TCP_NODELAY only on accepted sockets
    whose `proto` says TCP, and without it Nagle meets the client's delayed ACK (~40 ms a request).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(gateway: Gateway, sock: socket.socket, *,
                     announce: TextIO | None = None, lane: bool = True,
                     stop: anyio.Event | None = None) -> None:
    """Serve streamable HTTP on a listening socket until cancelled or `stop` is set (`lane`:
    `http_app`'s).

    `stop` is a graceful end, the one a SIGTERM asks for (its caller owns the signals; uvicorn
    installs none): no connection is accepted after it, the requests in flight are answered (at
    most `STOP_GRACE` s), every listen stream ends with its closing result and every standing
    notification stream is closed, then the app's lifespan ends as usual. Without `stop`, uvicorn
    handles SIGINT and SIGTERM itself, as it does for any app.
    """
    import uvicorn

    host, port = sock.getsockname()[:2]
    app = http_app(gateway, host=host, port=port, lane=lane)
    # No access log: at this log level its lines are never shown, yet each response would still
    # format the client's address and path for it.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                            timeout_graceful_shutdown=STOP_GRACE)
    server = uvicorn.Server(config) if stop is None else _quiet_uvicorn(config)
    out = announce if announce is not None else sys.stderr
    print(f"byref gateway listening on http://{_url_host(host)}:{port}/mcp", file=out, flush=True)
    if stop is None:
        await server.serve(sockets=[sock])
        return
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_when, stop, server, gateway, app.state.mcp_server)
        await server.serve(sockets=[sock])
        group.cancel_scope.cancel()


STOP_GRACE = 10
"""Seconds a graceful stop over HTTP waits for the requests in flight (then they are cancelled)."""


def _quiet_uvicorn(config: Any) -> Any:
    """A uvicorn server that installs no signal handlers (it would re-raise a caught SIGTERM
    after its shutdown, killing the process by the signal): its caller sets `should_exit`."""
    import uvicorn

    class Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Quiet(config)


async def _stop_when(stop: anyio.Event, server: Any, gateway: Gateway, mcp: GatewayServer
                     ) -> None:
    await stop.wait()
    server.should_exit = True
    # Streams that never end on their own would hold the shutdown until its grace runs out:
    # 2026-07-28 listen streams end gracefully (their closing result), and each handshake-era
    # session's standing GET stream is closed (the client is told to reconnect, and cannot).
    for state in gateway.scopes.all():
        state.listen.close()
    manager = mcp.session_manager
    for transport in session_transports(manager):
        with contextlib.suppress(Exception):
            transport.close_standalone_sse_stream()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
