"""Scopes and access: who a request runs as, and the conversation its refs resolve against.

Owns the mapping from a connection to a `Scope` and that scope's state: its conversation (the
gateway's own record of calls and results, which Message refs address, kept by the conversation
state port, `byref.conversations`), its subscription bus (2026-07-28 listen streams) and the
open connections to tell about tool-list changes. The law: over HTTP every request carries a
bearer token the config maps to a tenant and principal, a request without a valid one is
refused by the HTTP layer before any handler (or upstream) sees it, and refs never resolve
across scopes — each conversation has its own record, and the store answers another scope's key
as absent. An owner is a tenant, a principal and the grant's restrictions (`owned`): two tokens
of one principal with different grants never share a conversation or an artifact. Stored
results (Blob refs) belong to their owner, not to a session: over HTTP the token's, over stdio
the one local owner's (`stdio_owner`), so they keep their meaning across sessions, processes and
restarts; a conversation addresses Message refs. Conversations: by default
each MCP session is its own (`"conversation": "session"`; a 2026-07-28 request has no session
and uses its owner's), `"principal"` shares one across an owner's sessions; over stdio one
process is one conversation, a new one unless
`stdio_conversation` (`--conversation ID`) resumes one. A conversation's record is written
through the state port once a call (`persist`), so with durable state every Message ref
resolves after a restart, and memory holds the calls in flight and a few decoded messages. A
new record starts at a clock-derived seq, so a ref from another record is refused, never
answered with a newer result; one idle past its ttl expires, and a ref into it is told so.
Closing a session releases its conversation's memory. Identities are compared as structured
values (never a joined string, where `a/b` + `c` would equal `a` + `b/c`), and a connection is
forgotten when it closes.
"""

from __future__ import annotations

import hashlib
import sys
import time
import uuid
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.connection import Connection

from byref.conversations import (
    SHARED_CONVERSATION,
    ConversationError,
    ConversationState,
    ConversationTranscript,
)
from byref.errors import OperatorError
from byref.gateway.access.bearer import BearerVerifier, owner, restriction
from byref.gateway.access.held import STDIO_PRINCIPAL as STDIO_PRINCIPAL
from byref.gateway.access.held import open_conversations, stdio_scope
from byref.gateway.access.held import spill_directory as spill_directory
from byref.gateway.access.state import TRANSCRIPT_CACHE, ScopeState
from byref.gateway.config.file import GatewayConfig, Grant
from byref.store import Scope
from byref.transcript import fresh_origin

CONVERSATION = SHARED_CONVERSATION
"""The conversation id a principal's sessions share (`"conversation": "principal"`)."""
SESSION_PREFIX = "session-"
SWEEP_EVERY = 60.0
"""Seconds between sweeps of expired conversations (run when a conversation is opened)."""


def owned(tenant: str, principal: str, grant: Grant | None) -> Scope:
    """An owner's own scope: its artifacts, and its conversation where one is shared
    (`"conversation": "principal"`, 2026-07-28 requests, replicas). A restricting grant is a
    different owner from its principal's other grants, so it has a scope of its own."""
    if grant is None:
        return Scope(tenant, principal, CONVERSATION)
    digest = hashlib.sha256(owner(grant).encode()).hexdigest()[:16]
    return Scope(tenant, principal, f"{CONVERSATION}~{digest}")


class AccessRefused(OperatorError):
    """A request reached a handler without a grant (the HTTP layer should have refused it)."""


class Scopes:
    """Conversation state by scope: opened through the state port on first use, released when
    its last session closes (or at `close`)."""

    def __init__(self, config: GatewayConfig, *, state: ConversationState | None = None) -> None:
        self.config = config
        self._states: dict[Scope, ScopeState] = {}
        self._given = state
        self._conversations: ConversationState | None = state
        self._swept = time.monotonic()
        self._stdio_id = config.stdio_conversation or (
            CONVERSATION if config.conversation == "principal"
            else f"stdio-{uuid.uuid4().hex[:16]}")
        self._stdio_scope: Scope | None = None
        self._stdio_owner: Scope | None = None

    @property
    def conversations(self) -> ConversationState:
        """The state port: the config's byref.state, else SQLite beside a file store, else
        memory (spilled beside a file store or in the temp directory)."""
        if self._conversations is None:
            self._conversations = open_conversations(self.config)
        return self._conversations

    @property
    def stdio_scope(self) -> Scope:
        """The scope a stdio gateway runs in (one process is one scope)."""
        # One Scope while its parts stay (each call asks; building one checks its text, ~1.4 us).
        held = self._stdio_scope
        if (held is None or held.tenant != self.config.scope
                or held.conversation != self._stdio_id):
            held = self._stdio_scope = stdio_scope(self.config, self._stdio_id)
        return held

    @property
    def stdio_owner(self) -> Scope:
        """Where a stdio gateway's stored results live: its one local owner's scope (`owned`),
        shared by every stdio process over the same store, whatever its conversation."""
        held = self._stdio_owner
        if held is None or held.tenant != self.config.scope:
            held = self._stdio_owner = owned(self.config.scope, STDIO_PRINCIPAL, None)
        return held

    def state(self, scope: Scope) -> ScopeState:
        """The state of `scope`, opened on first use; one idle past its ttl is reopened as a new
        record after the old one."""
        found = self._states.get(scope)
        ttl = self.conversations.ttl if found is not None else None
        if found is not None and ttl is not None and (
                self.conversations.clock() - found.touched >= ttl):
            found = self._reopen(found)  # idle past its ttl: a new record after the old one
        if found is None:
            found = self._states[scope] = self._open(scope)
        return found

    def _open(self, scope: Scope, state: ScopeState | None = None) -> ScopeState:
        conversations = self.conversations
        if time.monotonic() - self._swept >= SWEEP_EVERY:
            self._swept = time.monotonic()
            conversations.sweep()
        conversation = conversations.open(scope, fresh_origin())
        transcript = ConversationTranscript(conversations, conversation, cache=TRANSCRIPT_CACHE,
                                            shared=self.config.replicas)
        if state is None:  # made over its record (a default transcript would open a spill file)
            state = ScopeState(scope, transcript=transcript)
        else:
            state.transcript = transcript
        state.declared = state._saved_declared = conversation.working_set
        state.usage_logged, state._usage_folded = conversation.usage, 0
        state.touched = conversations.clock()
        return state

    def _reopen(self, state: ScopeState) -> ScopeState:
        state.close()
        return self._open(state.scope, state)

    def release(self, scope: Scope) -> None:
        """Save and forget a conversation's state in memory (its last session closed). A
        session's own conversation kept only in memory is deleted with it: no later session can
        reach it (a principal's stays for its next session)."""
        state = self._states.pop(scope, None)
        if state is None:
            return
        state.close()
        if (self._conversations is not None and not self._conversations.durable
                and scope.conversation.startswith(SESSION_PREFIX)):
            self._conversations.delete(scope)

    def close(self) -> None:
        """Save and release every scope's conversation; the state port is closed if opened
        here."""
        try:
            for state in self._states.values():
                try:
                    state.close()
                except (ConversationError, OSError) as exc:
                    print(f"byref gateway: conversation {str(state.scope)!r} not saved: {exc}",
                          file=sys.stderr)
        finally:
            self._states.clear()
            if self._given is None and self._conversations is not None:
                self._conversations.close()
                self._conversations = None

    def all(self) -> list[ScopeState]:
        """Every scope state currently open."""
        return list(self._states.values())

    def for_request(self, request: Any, connection: Connection | None = None) -> ScopeState:
        """The conversation a handler's request runs in (`ctx.request`: None over stdio /
        in-process; `connection`: the request's MCP connection, whose session it is)."""
        if request is None:
            state = self.state(self.stdio_scope)
            state.artifacts = self.stdio_owner
            return state
        user = getattr(request, "scope", {}).get("user")
        if not isinstance(user, AuthenticatedUser):
            raise AccessRefused("This gateway serves HTTP requests only with a bearer token.")
        claims = user.access_token.claims or {}
        tenant, principal = str(claims["tenant"]), str(claims["principal"])
        grant = restriction(claims)
        session = connection.session_id if connection is not None else None
        mine = owned(tenant, principal, grant)
        if self.config.conversation == "principal" or self.config.replicas or not session:
            scope = mine
        else:
            # The SDK answers a session only to the owner (client_id) that opened it.
            scope = Scope(tenant, principal, SESSION_PREFIX + session)
        fresh = scope not in self._states
        state = self.state(scope)
        if fresh:
            state.grant, state.artifacts = grant, mine
            state.owner = user.access_token.client_id
        elif state.grant != grant:
            # One conversation, one grant: a token seeing other tools must not share its record.
            raise AccessRefused(f"Conversation {scope.conversation!r} of {principal!r} was "
                                "opened by a token with another grant; use that token, or a "
                                "principal of its own for this one.")
        if connection is not None and session and id(connection) not in state.sessions:
            state.sessions.add(id(connection))
            connection.exit_stack.callback(self._session_closed, scope, id(connection))
        return state

    def _session_closed(self, scope: Scope, connection: int) -> None:
        state = self._states.get(scope)
        if state is None:
            return
        state.sessions.discard(connection)
        if not state.sessions:
            try:
                self.release(scope)
            except (ConversationError, OSError) as exc:
                print(f"byref gateway: conversation {str(scope)!r} not saved: {exc}",
                      file=sys.stderr)


TokenMap = BearerVerifier
"""Static tokens only (`BearerVerifier(tokens)`); kept under its first name."""
