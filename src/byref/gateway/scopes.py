"""Scopes and access: who a request runs as, and the per-scope record refs resolve against.

Owns the mapping from a connection to a `Scope` and that scope's state: its transcript (the
gateway's own record of calls and results, which Message refs address), its subscription bus
(2026-07-28 listen streams) and the handshake-era sessions to tell about tool-list changes. The
law: over stdio one process is one scope; over HTTP every request carries a bearer token the
config maps to a tenant and principal, a request without a valid one is refused by the HTTP layer
before any handler (or upstream) sees it, and refs never resolve across scopes — each scope has
its own transcript, and the store answers another scope's key as absent.
"""

from __future__ import annotations

import hmac
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged

from byref.dispatch import Dispatcher
from byref.gateway.config import GatewayConfig, Grant
from byref.store import Scope
from byref.transcript import Transcript

CONVERSATION = "gateway"
STDIO_PRINCIPAL = "stdio"
_SESSIONS_KEPT = 64


class AccessRefused(Exception):
    """A request reached a handler without a grant (the HTTP layer should have refused it)."""


@dataclass
class ScopeState:
    scope: Scope
    transcript: Transcript = field(default_factory=Transcript)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)
    dispatchers: tuple[int, Dispatcher] | None = None
    """(toolbox version, dispatcher, dispatcher for explicit reads) for that version."""
    usage_logged: int = 0
    """How many of the transcript's (query, tool) pairs are already in the usage log."""
    _sessions: OrderedDict[int, ServerSession] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)

    def remember(self, session: ServerSession) -> None:
        """Keep a handshake-era connection's session to notify it of list changes later."""
        key = id(getattr(session, "_connection", session))
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > _SESSIONS_KEPT:
            self._sessions.popitem(last=False)

    async def announce(self, current: ServerSession | None = None) -> None:
        """Tell every client of this scope that the tool list changed, in both generations."""
        await self.bus.publish(ToolsListChanged())
        sessions = list(self._sessions.items())
        if current is not None:
            self.remember(current)
            sessions = list(self._sessions.items())
        for key, session in sessions:
            try:
                with anyio.move_on_after(5):
                    await session.send_tool_list_changed()
            except Exception:  # the connection is gone: forget it
                self._sessions.pop(key, None)


class Scopes:
    """Scope state by scope; created on first use."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._states: dict[Scope, ScopeState] = {}

    @property
    def stdio_scope(self) -> Scope:
        return Scope(self.config.scope, STDIO_PRINCIPAL, CONVERSATION)

    def state(self, scope: Scope) -> ScopeState:
        found = self._states.get(scope)
        if found is None:
            found = self._states[scope] = ScopeState(scope)
        return found

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
        return AccessToken(token=token, client_id=f"{grant.tenant}/{grant.principal}", scopes=[],
                           claims={"tenant": grant.tenant, "principal": grant.principal})
