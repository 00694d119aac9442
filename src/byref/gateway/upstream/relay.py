"""The way back: what an upstream says to a client reaches the client session that made the call.

Owns the routing of upstream → client traffic for one upstream process or session: sampling,
elicitation and roots requests, progress and log notifications. A handler marks the client request
it serves (`calling`, with the scope it runs as); an upstream operation started under that mark
registers the request as in flight on its upstream (`Relay`), and whatever the upstream sends
meanwhile goes to that request's session — on the request's own channel, so over HTTP it rides that
call's stream. The law: a message goes to one client, the one whose request is in flight on that
upstream (a request naming a progress token goes to the call that carries it); never to "the last
session", never broadcast. When requests of several client sessions are in flight at once, a
server→client request goes to the one whose call is awake (a parked call asleep on its client's
retry has its upstream handler blocked on the questions it put), else cannot be attributed and is
refused with a reason, and a log line is dropped. Outside any call, a request goes to the one
session of its owner that has used this upstream, when the upstream is its principal's alone
(`exclusive`) and exactly one such session can take requests; otherwise it is refused — except
`roots/list`, answered by the session that just told the server its roots changed, else from the
server's configured `roots` (none by default), so another owner's client never decides what a
server is told. Which clients share one upstream at all is `pooled`'s: by default one
process per principal on a gateway several principals reach. The gateway offers every upstream
sampling, elicitation and roots, so tools gated on them stay listed; a client that lacks one gets
the upstream's request refused, saying so — a 2026-07-28 one with
MissingRequiredClientCapabilityError, which its call answers too if it then fails
(`Caller.refusal`). A 2026-07-28 client's progress rides the stream of its call's answer. A
2026-07-28 upstream has no `logging/setLevel`: the level a handshake-era session asked for is kept
on its connection and travels with its calls (`forwarded_meta`), so each session hears lines at
its own level, whoever shares the upstream.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from byref.gateway.wire.sdk_server import connection_of
from byref.store import Scope

R = TypeVar("R", bound=BaseModel)

LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
_FORWARDED_META = (LOG_LEVEL_META,)
"""Request `_meta` keys an upstream call carries on (a 2026-07-28 client's log opt-in)."""
SESSION_LEVEL = "byref.gateway/logLevel"
"""Where a handshake-era client's `logging/setLevel` is kept (its connection's `state`): the
log opt-in its calls carry to a 2026-07-28 upstream, which has no `logging/setLevel`."""


class Park(Protocol):
    """A 2026-07-28 client's call parked while its client is asked for input, as the way back
    uses it (`modern.inputs.Parked`; named here so relay sits below `modern/`)."""

    @property
    def answered_once(self) -> bool:
        """Whether the client request that started it has been answered."""

    @property
    def asleep(self) -> bool:
        """Whether the call waits on its client alone (its upstream handler blocked)."""

    async def ask(self, request: Any, result_type: type[R]) -> R | types.ErrorData:
        """The upstream's question, put to the client by the next answer of its call."""


@dataclass(eq=False)
class Caller:
    """One client request being served: where replies to its upstream traffic go."""

    ctx: ServerRequestContext[Any, Any]
    park: Park | None = None
    """A 2026-07-28 client's call: its questions go into the call's next answer (`inputs`)."""
    owner: Scope | None = None
    """The scope the request runs as (which pooled upstream serves it, `pooled`)."""
    missing: set[str] = field(default_factory=set)
    """Capabilities an upstream asked this 2026-07-28 client for that it did not declare."""

    @property
    def modern(self) -> bool:
        """Whether the request is a 2026-07-28 one."""
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    def refusal(self) -> MCPError:
        """The MissingRequiredClientCapabilityError (-32021) for a call that failed after its
        upstream asked for capabilities the client did not declare (`missing`)."""
        names = sorted(self.missing)
        return MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, (
            f"The tool's server needs the client capabilities {names!r}, which this request's "
            "io.modelcontextprotocol/clientCapabilities does not declare."),
            {"requiredCapabilities": {name: {} for name in names}})

    @property
    def connection(self) -> Connection | None:
        """The request's connection, or None."""
        found = connection_of(self.ctx)
        return found if isinstance(found, Connection) else None

    @property
    def key(self) -> int:
        """Which client session: requests on one connection share it."""
        return id(self.connection) if self.connection is not None else id(self.ctx.session)

    @property
    def progress_token(self) -> Any:
        """The client's progress token for this request, or None."""
        meta = self.ctx.meta or {}
        return meta.get("progressToken", meta.get("progress_token"))

    def forwarded_meta(self, *, modern: bool = True) -> dict[str, Any] | None:
        """The request's `_meta` entries that are passed on upstream, or None; to a `modern`
        (2026-07-28) upstream, a handshake-era session's log level as its log opt-in."""
        meta: dict[str, Any] = dict(self.ctx.meta or {})
        kept = {k: meta[k] for k in _FORWARDED_META if k in meta}
        level = self.session_level
        if modern and level is not None:
            kept.setdefault(LOG_LEVEL_META, level)
        return kept or None

    @property
    def session_level(self) -> types.LoggingLevel | None:
        """The log level the request's (handshake-era) session last asked for, or None."""
        connection = self.connection
        found = connection.state.get(SESSION_LEVEL) if connection is not None else None
        return found if isinstance(found, str) else None  # type: ignore[return-value]

    def set_session_level(self, level: types.LoggingLevel) -> None:
        """The request's session asked for `level` (`logging/setLevel`): its own from now on,
        never another session's (`session_level`)."""
        connection = self.connection
        if connection is not None:
            connection.state[SESSION_LEVEL] = level

    def supports(self, what: str) -> bool:
        """Whether the client declared the capability `what` (sampling, elicitation, roots)."""
        caps = self.ctx.session.client_capabilities
        if caps is None:
            return False
        return getattr(caps, what, None) is not None

    @property
    def own_channel(self) -> bool:
        """Whether the request's own channel carries messages (not an HTTP request answered
        with one JSON body: then they go on the connection's standalone stream)."""
        return self.ctx.session.can_send_request

    async def request(self, request: Any, result_type: type[R], *,
                      scoped: bool) -> R | types.ErrorData:
        """Put an upstream's request to the client (through the parked call when there is one); its
        result or the client's error."""
        if self.park is not None:
            return await self.park.ask(request, result_type)
        scoped = scoped and self.own_channel
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id) if scoped else None
        return await self.ctx.session.send_request(request, result_type, metadata=metadata)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Pass an upstream's progress to the client (dropped once a parked request was
        answered)."""
        if self.park is not None and self.park.answered_once:
            return  # the request it belonged to has been answered (InputRequiredResult)
        if self.own_channel or self.modern:  # 2026-07-28: on the stream of its own answer
            await self.ctx.session.report_progress(progress, total, message)
        elif self.progress_token is not None:
            await self.ctx.session.send_progress_notification(
                self.progress_token, progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams, *, scoped: bool) -> None:
        """Pass an upstream's log message to the client (related to this request when `scoped`)."""
        with warnings.catch_warnings():  # deprecated for 2026-07-28, where it is opt-in
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            sending = self.ctx.session.send_log_message(
                params.level, params.data, logger=params.logger,
                related_request_id=self.ctx.request_id if scoped and self.own_channel
                else None)
        await sending


CALLER: ContextVar[Caller | None] = ContextVar("byref_gateway_caller", default=None)


@contextlib.contextmanager
def calling(ctx: ServerRequestContext[Any, Any], park: Park | None = None, *,
            owner: Scope | None = None) -> Iterator[Caller]:
    """Mark the client request a handler serves (run as `owner`), for every upstream operation
    it starts."""
    caller = Caller(ctx, park, owner)
    token = CALLER.set(caller)
    try:
        yield caller
    finally:
        CALLER.reset(token)


def may_ask(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's client could answer an upstream's question at all."""
    caps = ctx.session.client_capabilities
    return caps is not None and any(
        getattr(caps, c, None) is not None for c in ("sampling", "elicitation", "roots"))


def current() -> Caller | None:
    """The client request this task is serving, or None."""
    return CALLER.get()


_CAPABILITY = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation",
               "roots/list": "roots"}


_SESSIONS_KEPT = 4
DRAIN = 1.0
"""Seconds a call's answer waits at most for log lines still being passed to its client."""
ROOTS_OWED = 30.0
"""Seconds after a session tells a server its roots changed in which the server's roots/list
outside any call is answered by that session."""


class Relay:
    """One upstream process's (or session's) way back: the client requests in flight on it."""

    def __init__(self, server: str, roots: tuple[tuple[str, str | None], ...] = ()) -> None:
        self.server = server
        self.roots = roots
        """The server's configured roots: the answer when no client call can give one."""
        self.exclusive = False
        """Whether the upstream serves one principal's sessions only (`pooled`): then a request
        outside any call may go to the one session that used it."""
        self._flight: dict[int, Caller] = {}
        self._owed: tuple[Caller, float] | None = None
        self._sessions: dict[int, Caller] = {}
        """The newest request of each client session that used this upstream (a few kept)."""
        self._delivering: dict[int, set[anyio.Event]] = {}
        """Log lines being passed to each caller now (a call's answer waits for them)."""

    @property
    def in_flight(self) -> int:
        """Client requests in flight on this upstream now."""
        return len(self._flight)

    @contextlib.contextmanager
    def flight(self, caller: Caller | None) -> Iterator[None]:
        """Mark `caller` in flight on this upstream while the body runs (None: nothing is
        marked)."""
        if caller is None:
            yield
            return
        self._flight[id(caller)] = caller
        if self.exclusive:
            self._sessions.pop(caller.key, None)
            self._sessions[caller.key] = caller
            while len(self._sessions) > _SESSIONS_KEPT:
                self._sessions.pop(next(iter(self._sessions)))
        try:
            yield
        finally:
            self._flight.pop(id(caller), None)

    def owe_roots(self, caller: Caller) -> None:
        """`caller`'s session just told this server its roots changed: the roots/list the server
        sends back outside any call is that session's to answer (for `ROOTS_OWED` seconds)."""
        self._owed = (caller, time.monotonic() + ROOTS_OWED)

    def _targets(self) -> list[Caller]:
        """One caller per client session in flight (the newest request of each); when several
        are, those awake: a parked call asleep (`Parked.asleep`) has its upstream handler
        blocked on the questions it already put, so the question is another call's."""
        by_session: dict[int, Caller] = {}
        for caller in self._flight.values():
            by_session[caller.key] = caller
        callers = list(by_session.values())
        if len(callers) > 1:
            awake = [c for c in callers if c.park is None or not c.park.asleep]
            return awake or callers
        return callers

    def _by_token(self, request: Any) -> Caller | None:
        """The call in flight whose progress token the request names in its `_meta`, if any."""
        meta = getattr(getattr(request, "params", None), "meta", None) or {}
        token = meta.get("progressToken") if isinstance(meta, dict) else getattr(
            meta, "progress_token", None)
        if token is None:
            return None
        found = [c for c in self._flight.values() if c.progress_token == token]
        return found[0] if len(found) == 1 else None

    def _sole(self) -> Caller | None:
        """The one session of this upstream's owner that used it, when it can take a request
        outside a call (a 2026-07-28 client cannot); else None."""
        if not self.exclusive or len(self._sessions) != 1:
            return None
        (caller,) = self._sessions.values()
        return caller if caller.park is None and caller.connection is not None and \
            caller.connection.has_standalone_channel else None

    def _configured_roots(self) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=name)  # type: ignore[arg-type]
                                            for uri, name in self.roots])

    async def forward(self, request: Any, result_type: type[R]) -> R | types.ErrorData:
        """A server→client request, answered by the client whose call is in flight."""
        method = request.method
        what = _CAPABILITY.get(method, method)
        caller = self._by_token(request)
        scoped = True
        if caller is None:
            targets = self._targets()
            if len(targets) > 1:
                return types.ErrorData(code=types.INVALID_REQUEST, message=(
                    f"byref gateway: {method} from server {self.server!r} cannot be attributed: "
                    f"calls of {len(targets)} client sessions are in flight on it."))
            if targets:
                caller = targets[0]
            else:
                owed, self._owed = self._owed, None
                sole = self._sole()
                if owed is not None and owed[1] >= time.monotonic() and method == "roots/list":
                    caller, scoped = owed[0], False
                elif sole is not None:
                    caller, scoped = sole, False
                elif method == "roots/list":
                    return self._configured_roots()  # type: ignore[return-value]
                else:
                    return types.ErrorData(code=types.INVALID_REQUEST, message=(
                        f"byref gateway: {method} from server {self.server!r} arrived outside "
                        f"any client call, so no client can be asked; it is refused."))
        if not caller.supports(what):
            if caller.modern:  # its call then fails with -32021 naming it (`refusal`)
                caller.missing.add(what)
                return types.ErrorData(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY, message=(
                    f"byref gateway: the request to the gateway does not declare the client "
                    f"capability {what!r}, so server {self.server!r}'s {method} cannot be "
                    f"answered."), data={"requiredCapabilities": {what: {}}})
            return types.ErrorData(code=types.INVALID_REQUEST, message=(
                f"byref gateway: the client connected to the gateway does not support {what}, "
                f"so server {self.server!r}'s {method} cannot be answered."))
        try:
            return await caller.request(request, result_type, scoped=scoped)
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # the client is gone or cannot take requests: the upstream hears
            return types.ErrorData(code=types.INTERNAL_ERROR, message=(
                f"byref gateway: {method} could not reach the client: {type(exc).__name__}: "
                f"{exc}"[:300]))

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """An upstream log message, naming the server, to the one session whose call is in
        flight, else to the owner's sole session (`_sole`); otherwise it is dropped — never
        guessed, never broadcast."""
        targets = self._targets()
        sole = self._sole() if not targets else None
        if len(targets) != 1 and sole is None:
            return
        named = params.model_copy(update={
            "logger": self.server if not params.logger else f"{self.server}/{params.logger}"})
        caller = targets[0] if targets else sole
        assert caller is not None
        done = anyio.Event()
        self._delivering.setdefault(id(caller), set()).add(done)
        try:
            with contextlib.suppress(Exception):  # a client that cannot take it has gone
                await caller.log(named, scoped=bool(targets))
        finally:
            done.set()
            waiting = self._delivering.get(id(caller))
            if waiting is not None:
                waiting.discard(done)
                if not waiting:
                    del self._delivering[id(caller)]

    async def drained(self, caller: Caller | None) -> None:
        """Wait (at most `DRAIN` seconds) for the log lines on their way to `caller`: the SDK
        hands each upstream notification to a task of its own, so the call's result can overtake
        the last lines the server wrote before it, and a 2026-07-28 call's stream closes with
        its answer."""
        if caller is None or (not self._delivering and not caller.forwarded_meta()):
            return  # nothing on its way, and no 2026-07-28 log opt-in: no checkpoint per call
        await anyio.lowlevel.checkpoint()  # a delivery already scheduled starts first
        with anyio.move_on_after(DRAIN):
            for done in list(self._delivering.get(id(caller), ())):
                await done.wait()
