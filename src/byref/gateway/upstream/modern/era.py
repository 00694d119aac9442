"""Which protocol revision an upstream is spoken to in, and the stream only 2026-07-28 needs.

Owns the choice per upstream. A streamable-HTTP server is asked `server/discover` first (the SDK's
`auto`): one that speaks 2026-07-28 is spoken to in it (each request carries the `_meta` envelope
and the `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers, computed by the SDK from the arguments the
gateway sends, which are resolved), one that does not falls back to `initialize`. On HTTP the probe
and the handshake are separate requests, so a server that speaks both is not committed by the
probe. A stdio or SSE server is started in the handshake generation, which a server that speaks
both serves with everything its tools may need mid-call (sampling, elicitation and roots requests,
logs, resource subscriptions) — on stdio a successful probe would commit the connection to
2026-07-28, where a server has no way to ask mid-call. A server that refuses the handshake naming
only 2026-07-28 versions (`modern_only`) is started again and spoken to in that revision. An
entry's `"protocol": "handshake"` keeps a server in the handshake generation whatever it speaks
(for a server whose tools ask mid-call, which a 2026-07-28 connection cannot carry).

The law: the era is the server's answer, never guessed from its name or transport alone, and a
2026-07-28 upstream's list changes arrive on a `subscriptions/listen` stream kept open while it
lives (`listen`): a stream that drops is opened again, and since events are not replayed, the
upstream's lists are fetched again once it is (`on_change`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, NamedTuple

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from byref.gateway.config.servers import ServerConfig

Mode = Literal["legacy", "auto"]

RELISTEN_FIRST = 0.5
"""Seconds before a dropped listen stream is opened again (doubling on each failure in a row)."""
RELISTEN_MOST = 30.0
"""The longest wait between attempts to open a listen stream again."""


def first_mode(config: ServerConfig) -> Mode:
    """How a connection to `config`'s server starts: `auto` (discover, else the handshake) on
    streamable HTTP, the handshake on stdio and SSE or where the entry says
    `"protocol": "handshake"`."""
    if config.protocol == "handshake":
        return "legacy"
    return "auto" if config.url is not None and config.transport != "sse" else "legacy"


def modern_only(exc: BaseException) -> bool:
    """Whether `exc` (a failed start) is the server refusing the handshake with an
    UnsupportedProtocolVersionError that names 2026-07-28 versions and no handshake-era one."""
    if isinstance(exc, BaseExceptionGroup):
        return any(modern_only(inner) for inner in exc.exceptions)
    if not isinstance(exc, MCPError) or exc.error.code != types.UNSUPPORTED_PROTOCOL_VERSION:
        return False
    data = exc.error.data
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return False
    return any(v in MODERN_PROTOCOL_VERSIONS for v in supported) and not any(
        v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported)


class Wanted(NamedTuple):
    """What a listen stream asks for: list changes of tools, prompts, resources."""

    tools: bool
    prompts: bool
    resources: bool


def listens_for(client: Client, *, tools: bool, others: bool) -> Wanted | None:
    """The `subscriptions/listen` filter for a live connection (`tools`: the gateway follows
    tool list changes; `others`: resource and prompt ones), or None when there is nothing to
    listen for (a handshake-era connection, or a server that announces no list changes)."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    caps = client.server_capabilities
    wanted = Wanted(
        tools=tools and caps.tools is not None and bool(caps.tools.list_changed),
        prompts=others and caps.prompts is not None and bool(caps.prompts.list_changed),
        resources=others and caps.resources is not None and bool(caps.resources.list_changed))
    return wanted if any(wanted) else None


async def listen(client: Client, wanted: Wanted, stopped: anyio.Event,
                 on_change: Callable[[], Awaitable[None]]) -> None:
    """Keep a `subscriptions/listen` stream open on `client` until `stopped`. Its events reach
    the connection's message handler as the notifications they stand for (the SDK passes each
    on there too), so they are routed where a handshake-era server's are; this loop only keeps
    the stream open, and after opening it again calls `on_change` (what was missed is
    refetched)."""
    wait = RELISTEN_FIRST
    again = False
    while not stopped.is_set():
        try:
            async with client.listen(tools_list_changed=wanted.tools,
                                     prompts_list_changed=wanted.prompts,
                                     resources_list_changed=wanted.resources) as subscription:
                wait = RELISTEN_FIRST
                if again:
                    await on_change()
                async for _ in subscription:
                    pass
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # lost, refused or the connection is going: try again, bounded
            pass
        again = True
        with anyio.move_on_after(wait):
            await stopped.wait()
        wait = min(wait * 2, RELISTEN_MOST)
