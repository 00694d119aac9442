"""How long a 2026-07-28 client may keep the gateway's lists, and who may share them.

Owns the `ttlMs`/`cacheScope` the gateway's cacheable results carry (the SDK's `CacheHint`,
applied by `apply_cache_hint`, per list by `ListHints`; a handshake-era answer drops both on the
SDK's way out). The law:
never longer than the shortest `ttlMs` of the 2026-07-28 upstream lists it aggregates, and
`private` if any of them is (`hints`; a handshake-era upstream's list says nothing); else
`private` whenever the answer may differ by caller: a gateway whose grants (a token's, or any a
JWT may carry) restrict what some caller sees, a caller restricted now, a list read from
instances kept per tenant, principal or conversation (`share`), and resources (the upstreams'
data, not known to be the same for everyone); `public` only when everyone reads the same. The
freshness is `LIST_TTL_MS`, and 0 while a server is still starting or unavailable (the answer
changes when it arrives, so no client should keep it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext

from byref.gateway.config.file import GatewayConfig, Grant
from byref.gateway.config.file import restricts as restricts
from byref.gateway.upstream.modern.hints import combined

Ctx = ServerRequestContext[Any, Any]
R = TypeVar("R", bound=types.CacheableResult)

LIST_TTL_MS = 60_000
"""How long a settled list stays fresh: a change before then reaches a listening client on its
`subscriptions/listen` stream (which evicts its cached list), one not listening within a minute."""


def per_caller(config: GatewayConfig) -> bool:
    """Whether some server runs an instance per tenant, principal or conversation, so what it
    lists may be that caller's."""
    return any(config.share_of(s) != "all" for s in config.servers)


def list_hint(config: GatewayConfig, grant: Grant | None, *, settled: bool,
              instances: bool = False, data: bool = False) -> CacheHint:
    """The hint for one list answer: `grant`, the caller's restriction (None: none);
    `settled`, no server still starting or unavailable; `instances`, read from the caller's
    own instances (resources, prompts, templates); `data`, the upstreams' data (resources)."""
    private = (data or grant is not None or restricts(config)
               or (instances and per_caller(config)))
    return CacheHint(ttl_ms=LIST_TTL_MS if settled else 0,
                     scope="private" if private else "public")


class ListHints:
    """The hints of one gateway's lists: `indexed()` is each server's state (`Gateway.indexed`),
    `grant_of(ctx)` the caller's restriction."""

    def __init__(self, config: GatewayConfig, indexed: Callable[[], Mapping[str, str]],
                 grant_of: Callable[[Ctx], Grant | None], *,
                 tools: Callable[[], Iterable[CacheHint | None]] = tuple) -> None:
        self._config, self._indexed, self._grant_of = config, indexed, grant_of
        self._tools = tools
        """The hints of the upstream tool lists the catalog holds, as they stand now."""

    def settled(self) -> bool:
        """Whether every server is listed (none starting, none failed)."""
        return all(v == "listed" for v in self._indexed().values())

    def apply(self, ctx: Ctx, result: R, *, instances: bool = False, data: bool = False) -> R:
        """`result` with the hint its caller may cache it under (see `list_hint`), bounded by
        the upstreams' it aggregates: the tool catalog's for a tool list, else what the
        passthrough handler set on it (`fanout.bound_of`)."""
        hint = list_hint(self._config, self._grant_of(ctx), settled=self.settled(),
                         instances=instances, data=data)
        if isinstance(result, types.ListToolsResult):
            for upstream in self._tools():
                hint = combined(hint, upstream) or hint
        elif "ttl_ms" in result.model_fields_set:
            hint = combined(hint, CacheHint(ttl_ms=result.ttl_ms,
                                            scope=result.cache_scope)) or hint
        return result.model_copy(update={"ttl_ms": hint.ttl_ms, "cache_scope": hint.scope})

    def around(self, handler: Callable[[Ctx, Any], Awaitable[R]], *, data: bool = False
               ) -> Callable[[Ctx, Any], Awaitable[R]]:
        """A passthrough list handler whose answers carry their hint (read from the caller's
        instances; `data`: the upstreams' data)."""
        async def answer(ctx: Ctx, params: Any) -> R:
            return self.apply(ctx, await handler(ctx, params), instances=True, data=data)

        return answer
