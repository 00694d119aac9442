"""The resource updates a 2026-07-28 upstream is asked for: one `subscriptions/listen` stream.

That revision has no `resources/subscribe`: a client names the URIs it wants updates of in a
listen stream's `resourceSubscriptions`, fixed when the stream opens. Owns that stream for one
live connection (`Watch`): the gateway's watched URIs of one upstream instance (counted by
`Upstream.watch`) ride one stream beside the list-change one (`era.listen`), and its
`notifications/resources/updated` reach the connection's message handler as a handshake-era
server's do (the SDK passes each event on there), so they are routed the same way.

The law: the set of URIs changes by opening a stream with the new set (and waiting for its
acknowledgment) before the old one ends, so an update is never missed in between (one may be
told twice: an update is a level trigger, "read it again"); a first open that fails is the
subscriber's error; a stream that drops later is opened again (bounded backoff, `era`) and every
URI it watched is told updated (`missed`), since nothing is replayed and what changed meanwhile
is unknown.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.gateway.upstream.modern.era import RELISTEN_FIRST, RELISTEN_MOST
from byref.gateway.upstream.relay import CALLER

Uris = frozenset[str]


class Watch:
    """The one listen stream of a live 2026-07-28 connection that carries its watched URIs'
    updates (`follow`); it ends with the connection (`group`, the connection's task group)."""

    def __init__(self, client: Client, group: anyio.abc.TaskGroup,
                 missed: Callable[[Uris], Awaitable[None]]) -> None:
        self._client = client
        self._group = group
        self._missed = missed
        self._lock = anyio.Lock()
        self._open: tuple[Uris, anyio.CancelScope] | None = None

    @property
    def uris(self) -> Uris:
        """The URIs the open stream watches (none when no stream is open)."""
        return self._open[0] if self._open is not None else frozenset()

    async def follow(self, uris: Uris) -> None:
        """Watch exactly `uris` from now on: a stream naming them is open and acknowledged when
        this returns (none for no URIs); raises MCPError when the server refuses it."""
        async with self._lock:
            old = self._open
            if old is not None and old[0] == uris:
                return
            scope: anyio.CancelScope | None = None
            if uris:
                scope = await self._group.start(self._stream, uris)
            self._open = (uris, scope) if scope is not None else None
            if old is not None:
                old[1].cancel()

    async def _stream(self, uris: Uris, *,
                      task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
        CALLER.set(None)  # no client request is this stream's (`relay`)
        with anyio.CancelScope() as scope:
            wait, opened = RELISTEN_FIRST, False
            while True:
                try:
                    async with self._client.listen(
                            resource_subscriptions=sorted(uris)) as subscription:
                        if opened:
                            await self._missed(uris)
                        else:
                            opened = True
                            task_status.started(scope)
                        wait = RELISTEN_FIRST
                        async for _ in subscription:
                            pass  # its events are routed from the message handler
                except anyio.get_cancelled_exc_class():
                    raise
                except MCPError:
                    if not opened:
                        raise
                except Exception as exc:  # lost, or the connection is going: again, bounded
                    if not opened:
                        raise MCPError(types.INTERNAL_ERROR,
                                       f"its subscriptions/listen stream did not open "
                                       f"({type(exc).__name__}: {exc})") from None
                await anyio.sleep(wait)
                wait = min(wait * 2, RELISTEN_MOST)


def modern(client: Client) -> bool:
    """Whether `client`'s connection speaks 2026-07-28 (resource updates ride a listen stream)."""
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


class Watched:
    """One upstream instance's watched URIs, counted by watcher, and its live connection's
    stream (`attach`): what `Upstream.watch` asks the server for."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.counts: Counter[str] = Counter()
        self._stream: tuple[Client, Watch] | None = None

    @property
    def uris(self) -> Uris:
        """Every URI watched now."""
        return frozenset(self.counts)

    @property
    def streamed(self) -> Uris:
        """The URIs the live connection's listen stream names now (none in the handshake
        generation, where each was subscribed on its own)."""
        return self._stream[1].uris if self._stream is not None else frozenset()

    def added(self, uri: str) -> bool:
        """Count one watcher of `uri` more; True when it is the first."""
        self.counts[uri] += 1
        return self.counts[uri] == 1

    def removed(self, uri: str) -> bool:
        """Count one watcher of `uri` fewer; True when it was the last (or none was)."""
        if self.counts[uri] <= 1:
            self.counts.pop(uri, None)
            return True
        self.counts[uri] -= 1
        return False

    def attach(self, client: Client, group: anyio.abc.TaskGroup,
               missed: Callable[[Uris], Awaitable[None]]) -> None:
        """A new live connection (`group`: its task group): a 2026-07-28 one started again
        watches what the one before watched, each such URI told updated (it may have changed
        meanwhile). A first start asks for nothing here: the watch that started it asks."""
        again = self._stream is not None
        stream = Watch(client, group, missed)
        self._stream = (client, stream)
        if again and self.counts and modern(client):
            async def rewatch() -> None:
                with contextlib.suppress(MCPError):  # refused now: its watchers hear no more
                    await stream.follow(self.uris)
                    await missed(stream.uris)

            group.start_soon(rewatch)

    def _of(self, client: Client) -> Watch | None:
        found = self._stream
        return found[1] if found is not None and found[0] is client and modern(client) \
            else None

    async def subscribe(self, client: Client, uri: str) -> None:
        """Ask the server (on `client`) for `uri`'s updates: `resources/subscribe` in the
        handshake generation, else its listen stream widened to every watched URI; raises
        MCPError when the server offers no subscriptions or refuses."""
        caps = client.server_capabilities.resources
        if caps is None or not caps.subscribe:
            raise MCPError(types.INVALID_REQUEST,
                           f"Server {self.server!r} does not offer resource subscriptions.")
        stream = self._of(client)
        if stream is not None:
            await stream.follow(self.uris)
            return
        with warnings.catch_warnings():  # removed in 2026-07-28, where the stream serves
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)

    async def unsubscribe(self, client: Client, uri: str) -> None:
        """Stop asking for `uri`'s updates: `resources/unsubscribe`, or the stream narrowed to
        the URIs still watched (closed when none is)."""
        stream = self._of(client)
        if stream is not None:
            await stream.follow(self.uris)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.unsubscribe_resource(uri)
