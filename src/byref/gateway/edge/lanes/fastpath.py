"""A plain `tools/call` answered at the server edge without the SDK's per-request model passes.

Owns one server middleware (`PlainCalls`, a seam the SDK's low-level server offers: a middleware
that answers without `call_next` returns its own wire result). For every `tools/call` the SDK's
runner validates the raw params against the protocol surface, validates them again into
`CallToolRequestParams`, and shapes the handler's `CallToolResult` by dumping it, validating the
dump against the surface and dumping that again. A plain call — `name` text, `arguments` an
object or absent, nothing else beside a well-formed `_meta`, on an initialized connection at a
version that has `tools/call`, not a 2026-07-28 call that may be asked for input (that one is
parked, `inputs`) — needs none of it: the gateway reads the two fields itself, runs the call
exactly as the handler does, and writes the answer's JSON directly.

The law: a plain call's answer is the very JSON the SDK's own path makes of the handler's result
(pinned by a test over both protocol generations); anything not plain — a malformed request, an
answer with images, links or structuredContent — goes the SDK's way (the request to the handler,
the rich answer through the SDK's result sieve), so errors and shapes are the SDK's. Tracing is
untouched: the middleware runs inside the SDK's OpenTelemetry span. Being the gateway's one
middleware (the lanes require exactly it), it is also the backstop that bounds every error a
handler raises to `ERROR_CHARS` characters of message: each refusal quotes a client's input
through `byref.refs.quote`, but an upstream's own message or an SDK error may echo a megabyte.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, get_tracer_provider

from byref.gateway.edge.answer import wire_answer
from byref.gateway.edge.tasks import declares_tasks
from byref.gateway.upstream.relay import may_ask
from byref.transcript import Part

CALL = "tools/call"
_PLAIN_KEYS = frozenset({"name", "arguments", "_meta"})
# What the stdio and HTTP lanes (stdio.py, http.py) take as a plain request off the wire:
REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
"""A plain request's keys: the JSON-RPC four, nothing beside."""
ENVELOPE = frozenset({types.PROTOCOL_VERSION_META_KEY, types.CLIENT_INFO_META_KEY,
                      types.CLIENT_CAPABILITIES_META_KEY})
"""The `_meta` keys a plain 2026-07-28 call may carry (a progress token, trace context or
anything more sends it the SDK's way)."""
ID_RANGE = range(-(1 << 63), 1 << 63)
"""Integer ids a lane takes: 64-bit, as the SDK's request id."""
ERROR_CHARS = 1_000
"""At most this many characters of an error's message reach the client."""


def bounded_message(text: str, limit: int = ERROR_CHARS) -> str:
    """`text` cut to `limit` characters, saying how long it was when cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text):,} characters in all]"


def untraced() -> bool:
    """No tracer provider installed: the SDK's span would be a no-op, so a lane may skip it."""
    return isinstance(get_tracer_provider(), ProxyTracerProvider | NoOpTracerProvider)

Run = Callable[[ServerRequestContext[Any, Any], str, dict[str, Any]], Awaitable[Part]]
"""(request, tool name, arguments) → the recorded result part, as the handler runs it."""
Extras = Callable[[ServerRequestContext[Any, Any], Part],
                  Awaitable[tuple[list[types.ContentBlock], Any] | None]]
"""(request, part) → a rich answer's whole content and structuredContent, or None
(`answer.answer_extras`)."""
Announce = Callable[[ServerRequestContext[Any, Any], Part], Awaitable[dict[str, Any] | None]]
"""(request, part) → what the answer's `_meta` adds for a client that declared an extension."""


def plain_call(ctx: ServerRequestContext[Any, Any], connection: Connection | None
               ) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of a `tools/call` the fast path answers, or None for the SDK's path."""
    if ctx.method != CALL or ctx.request_id is None:
        return None
    params = ctx.params
    if not isinstance(params, Mapping) or not _PLAIN_KEYS.issuperset(params):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    if "_meta" in params and ctx.meta is None:  # the runner found it malformed: its error
        return None
    version = ctx.protocol_version
    if (CALL, version) not in methods.CLIENT_REQUESTS:
        return None
    if connection is None or not connection.initialize_accepted:
        return None
    if version in MODERN_PROTOCOL_VERSIONS and (may_ask(ctx) or declares_tasks(ctx)):
        return None  # a 2026-07-28 call that may be asked for input runs parked, or that may
        # become a task (`tasks`): the handler's
    return name, {} if arguments is None else arguments


class PlainCalls:
    """Server middleware: a plain `tools/call` run by `run` and answered as wire JSON."""

    def __init__(self, server: Server[Any], run: Run, extras: Extras,
                 connection: Callable[[ServerRequestContext[Any, Any]], Connection | None],
                 announce: Announce | None = None) -> None:
        self._server = server
        self._announce = announce
        self._run = run
        self._extras = extras
        self._connection = connection
        self.seen: Callable[[ServerRequestContext[Any, Any], Connection | None], None] | None = None
        """Told of every request the SDK's loop serves (`stdio.StdioLane.seen`)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        """Answer a plain call here; hand anything else to the rest of the chain. An error
        leaving either with a message past `ERROR_CHARS` is cut (its type, code, data kept)."""
        try:
            if self.seen is not None:
                self.seen(ctx, self._connection(ctx))
            if ctx.method != CALL or (plain := plain_call(ctx, self._connection(ctx))) is None:
                return await call_next(ctx)
            if self._server.cache_hints.get(CALL) is not None:  # the runner applies hints
                return await call_next(ctx)
            return await self.answer(ctx, *plain)
        except MCPError as exc:
            if len(exc.error.message) > ERROR_CHARS:  # in place: a subclass stays itself
                exc.error = exc.error.model_copy(
                    update={"message": bounded_message(exc.error.message)})
            raise

    async def answer(self, ctx: ServerRequestContext[Any, Any], name: str,
                     arguments: dict[str, Any]) -> dict[str, Any]:
        """Run the plain call `name(arguments)`; its wire result is `answer.wire_answer`'s."""
        part = await self._run(ctx, name, arguments)
        out = wire_answer(part, await self._extras(ctx, part), ctx.protocol_version,
                          self._server)
        extra = None if self._announce is None else await self._announce(ctx, part)
        if extra is not None:
            out["_meta"] = {**extra, **out.get("_meta", {})}
        return out
