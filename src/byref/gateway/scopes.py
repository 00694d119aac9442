"""Scopes and access: who a request runs as, and the per-scope record refs resolve against.

Owns the mapping from a connection to a `Scope` and that scope's state: its transcript (the
gateway's own record of calls and results, which Message refs address), its subscription bus
(2026-07-28 listen streams) and the open connections to tell about tool-list changes. The law:
over stdio one process is one scope; over HTTP every request carries a bearer token the config
maps to a tenant and principal, a request without a valid one is refused by the HTTP layer before
any handler (or upstream) sees it, and refs never resolve across scopes — each scope has its own
transcript, and the store answers another scope's key as absent. A transcript starts at a
clock-derived seq, so a Message ref minted before a restart is refused, never answered with a
newer result; it spills to a nameless file (beside a file store, else in the temp directory),
so memory holds its index and a few recent messages, not every result. Identities are compared
as structured values (never a joined string, where `a/b` + `c` would equal `a` + `b/c`), and a
connection is forgotten when it closes.
"""

from __future__ import annotations

import hmac
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged

from byref.dispatch import Dispatcher
from byref.gateway.config import GatewayConfig, Grant
from byref.store import Scope
from byref.transcript import Transcript, fresh_origin

CONVERSATION = "gateway"
STDIO_PRINCIPAL = "stdio"
_CONNECTIONS_KEPT = 64
TRANSCRIPT_CACHE = 32
"""Decoded messages a scope keeps: the working set reads only the newest, refs mostly recent
ones; measured, a larger cache only raises the RSS a session starts with (cache=0 is no lower)."""


class AccessRefused(Exception):
    """A request reached a handler without a grant (the HTTP layer should have refused it)."""


def _transcript(spill: Path | None = None) -> Transcript:
    # Not durable, so a restart loses it: a fresh origin makes every older Message ref a
    # refusal. Spilled to a nameless file, so a long session costs its index, not its results.
    return Transcript(origin=fresh_origin(), spill=True if spill is None else spill,
                      cache=TRANSCRIPT_CACHE)


def spill_directory(store: str | None) -> Path | None:
    """Where transcripts spill: beside a file store (on its disk), else the system's temp dir."""
    if store is None:
        return None
    parts = urlsplit(store)
    if parts.scheme != "file":
        return None
    # As `open_store` reads it: file://.byref is relative (netloc holds the first segment).
    root = Path(parts.netloc + parts.path or ".byref")
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclass
class ScopeState:
    scope: Scope
    transcript: Transcript = field(default_factory=_transcript)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)
    dispatchers: tuple[int, Dispatcher] | None = None
    """(toolbox version, dispatcher) for that version; dropped when the toolbox is rebuilt."""
    declared: tuple[str, ...] = ()
    """The working set this scope's clients were last told about (a change is announced)."""
    _connections: OrderedDict[int, Connection] = field(default_factory=OrderedDict)
    """Open connections with a channel for notifications, by identity (held, so ids stay)."""

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)

    def remember(self, connection: Connection) -> None:
        """Keep an open connection to notify it of list changes; forgotten when it closes."""
        if not connection.has_standalone_channel:
            return  # a 2026-07-28 request's own connection: its client listens on the bus
        key = id(connection)
        if key not in self._connections:
            connection.exit_stack.callback(self.forget, connection)
        self._connections[key] = connection
        self._connections.move_to_end(key)
        while len(self._connections) > _CONNECTIONS_KEPT:
            self._connections.popitem(last=False)

    def forget(self, connection: Connection) -> None:
        if self._connections.get(id(connection)) is connection:
            del self._connections[id(connection)]

    @property
    def connections(self) -> int:
        return len(self._connections)

    async def announce(self, current: Connection | None = None) -> None:
        """Tell every client of this scope that the tool list changed, in both generations."""
        await self.bus.publish(ToolsListChanged())
        if current is not None:
            self.remember(current)
        for connection in list(self._connections.values()):
            try:
                with anyio.move_on_after(5):
                    await connection.send_tool_list_changed()
            except Exception:  # it cannot take a notice: it is gone
                self.forget(connection)


class Scopes:
    """Scope state by scope; created on first use."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._states: dict[Scope, ScopeState] = {}
        self._spill: Path | Literal[False] | None = False
        """The spill directory, found at the first scope (False until then)."""

    @property
    def stdio_scope(self) -> Scope:
        return Scope(self.config.scope, STDIO_PRINCIPAL, CONVERSATION)

    def state(self, scope: Scope) -> ScopeState:
        found = self._states.get(scope)
        if found is None:
            if self._spill is False:
                self._spill = spill_directory(self.config.store)
            found = self._states[scope] = ScopeState(scope, _transcript(self._spill))
        return found

    def close(self) -> None:
        """Release every scope's transcript (its spill file); the scopes are forgotten."""
        for state in self._states.values():
            state.transcript.close()
        self._states.clear()

    def all(self) -> list[ScopeState]:
        return list(self._states.values())

    def for_request(self, request: Any) -> ScopeState:
        """The scope a handler's request runs in (`ctx.request`: None over stdio / in-process)."""
        if request is None:
            return self.state(self.stdio_scope)
        user = getattr(request, "scope", {}).get("user")
        if not isinstance(user, AuthenticatedUser):
            raise AccessRefused("This gateway serves HTTP requests only with a bearer token.")
        claims = user.access_token.claims or {}
        return self.state(Scope(str(claims["tenant"]), str(claims["principal"]), CONVERSATION))


class TokenMap:
    """The SDK's `TokenVerifier`: a configured bearer token → its tenant and principal."""

    def __init__(self, tokens: dict[str, Grant]) -> None:
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        grant: Grant | None = None
        for known, g in self._tokens.items():
            # Compare against every token in constant time; never short-circuit on a match.
            if hmac.compare_digest(known.encode(), token.encode()):
                grant = g
        if grant is None:
            return None
        # The SDK binds an HTTP session to client_id: encode the pair, never join it.
        owner = json.dumps([grant.tenant, grant.principal], ensure_ascii=False)
        return AccessToken(token=token, client_id=owner, scopes=[],
                           claims={"tenant": grant.tenant, "principal": grant.principal})
