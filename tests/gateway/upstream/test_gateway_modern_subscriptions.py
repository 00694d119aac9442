"""A 2026-07-28 upstream's resource updates and log lines, through the gateway, to clients of
both generations and two tenants (`fixtures/modern_only.py` over stdio, one process per
principal; the official `mcp` client over HTTP with a token each).

That revision has no `resources/subscribe` and no `logging/setLevel`: a handshake-era client's
subscription becomes a URI on the upstream instance's `subscriptions/listen` stream, and its log
level the `io.modelcontextprotocol/logLevel` its calls carry. An update reaches exactly the
clients watching that URI on the instance that announced it (never another tenant's); a log line
reaches the calling client at the level its own session asked for.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, text
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated
from test_gateway_tenancy import ALICE, MALLORY, client, serving

from _waits import scaled
from byref.gateway.passthrough.uris import namespaced

pytestmark = pytest.mark.anyio
NOTE_A = namespaced("modern", "note://a")
NOTE_B = namespaced("modern", "note://b")


class Heard:
    """A client's resource updates and log lines, as its message handler and log callback
    receive them."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.logs: list[tuple[str, str | None, Any]] = []
        self._told = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))
            self._told.set()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.logger, params.data))

    async def updates(self, count: int) -> None:
        """Wait until `count` updates have arrived in all (the test's deadline bounds it)."""
        while len(self.updated) < count:
            await self._told.wait()
            self._told = anyio.Event()


@asynccontextmanager
async def _client(url: str, token: str, generation: str, heard: Heard,
                  **options: Any) -> AsyncIterator[Client]:
    async with client(url, token, mode=generation, message_handler=heard.on_message,
                      logging_callback=heard.on_log, **options) as c:
        yield c


async def _touch(c: Client, uri: str) -> None:
    result = await c.call_tool("modern__touch", {"uri": uri})
    assert not result.is_error, result.content


async def _legacy(call: Any) -> Any:
    with warnings.catch_warnings():  # the handshake era's own methods, on purpose
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return await call()


async def test_updates_reach_exactly_the_subscribers_on_the_instance_that_announced_them(
        world: World) -> None:
    servers = {"modern": world.fixture("modern_only.py", 20)}
    alice_old, alice_new, mallory = Heard(), Heard(), Heard()
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, mode="direct") as (gateway, url), _client(
                url, ALICE, "legacy", alice_old) as old, _client(
                url, ALICE, "auto", alice_new) as new, _client(
                url, MALLORY, "legacy", mallory) as evil:
            assert new.protocol_version == "2026-07-28"
            assert old.protocol_version != "2026-07-28"
            await gateway.toolbox(wait=scaled(30))
            # Alice watches note://a from both generations, Mallory from her own instance.
            await _legacy(lambda: old.subscribe_resource(NOTE_A))
            await _legacy(lambda: evil.subscribe_resource(NOTE_A))
            async with new.listen(resource_subscriptions=[NOTE_A]) as stream:
                instances = gateway.upstreams["modern"].instances
                alice_up, mallory_up = (u for k, u in sorted(instances.items())
                                        if k[0] in ("acme", "evil"))
                assert alice_up.connected is not None
                assert alice_up.connected.protocol_version == "2026-07-28"
                assert alice_up.watched.counts == {"note://a": 2}
                assert mallory_up.watched.counts == {"note://a": 1}

                await _touch(old, "note://a")  # on Alice's process
                await alice_old.updates(1)
                async for event in stream:
                    assert event == ResourceUpdated(uri=NOTE_A)
                    break
                await _touch(old, "note://b")  # watched by no one: told to no one
                await _touch(evil, "note://a")  # on Mallory's process
                await mallory.updates(1)
                await old.list_tools()  # a round trip each: anything leaked has arrived
                await evil.list_tools()
                assert alice_old.updated == [NOTE_A]
                assert mallory.updated == [NOTE_A]
                # Each tenant's process was touched on its own.
                read = await old.read_resource(NOTE_A)
                assert [c.text for c in read.contents] == ["touched 1 times"]  # type: ignore[union-attr]
            # Alice's stream closed, her legacy subscription ended: her instance watches nothing
            # and its listen stream for resources is closed; Mallory's still watches.
            await _legacy(lambda: old.unsubscribe_resource(NOTE_A))
            assert alice_up.watched.counts == {}
            assert mallory_up.watched.counts == {"note://a": 1}
            # Past the idle time, a watched process is kept (its watcher would hear nothing
            # more); an unwatched one is stopped.
            pool = gateway.upstreams.pool
            pool.clock = lambda: time.monotonic() + pool.idle + 1
            await pool.sweep()
            assert mallory_up.alive and not alice_up.alive
            # Its stream's events are passed to its message handler too (the SDK's tee): once.
            assert alice_new.updated == [NOTE_A]


async def test_the_stream_widens_narrows_and_after_a_drop_tells_every_uri_updated(
        world: World) -> None:
    servers = {"modern": world.fixture("modern_only.py", 20)}
    heard = Heard()
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, mode="direct") as (gateway, url), _client(
                url, ALICE, "legacy", heard) as c:
            await gateway.toolbox(wait=scaled(30))
            await _legacy(lambda: c.subscribe_resource(NOTE_A))
            (up,) = (u for k, u in gateway.upstreams["modern"].instances.items()
                     if k and k[0] == "acme")
            assert up.watched.streamed == {"note://a"}
            await _legacy(lambda: c.subscribe_resource(NOTE_B))  # a wider stream replaces it
            assert up.watched.streamed == {"note://a", "note://b"}
            await _touch(c, "note://b")
            await heard.updates(1)
            assert heard.updated == [NOTE_B]
            # The server ends every listen stream: opened again, and since nothing is
            # replayed, each watched URI is told updated (it may have changed meanwhile).
            await c.call_tool("modern__end_streams", {})
            await heard.updates(3)
            assert sorted(heard.updated[1:]) == [NOTE_A, NOTE_B]
            await _touch(c, "note://a")  # the stream opened again carries the next update
            await heard.updates(4)
            assert heard.updated[3:] == [NOTE_A]
            await _legacy(lambda: c.unsubscribe_resource(NOTE_A))  # a narrower one
            assert up.watched.streamed == {"note://b"}
            await _legacy(lambda: c.unsubscribe_resource(NOTE_B))  # none: closed
            assert up.watched.streamed == frozenset()


@pytest.mark.parametrize("generation", ["legacy", "auto"])
async def test_log_lines_reach_each_client_at_the_level_its_own_session_asked(
        world: World, generation: str) -> None:
    """One upstream session shared by both tenants (`"share": "all"`): the level travels with
    each request, so Mallory's never changes what Alice is sent."""
    servers = {"modern": world.fixture("modern_only.py", 20, share="all")}
    alice, mallory = Heard(), Heard()
    alice_level = {} if generation == "legacy" else {"log_level": "warning"}
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, mode="direct") as (gateway, url), _client(
                url, ALICE, generation, alice, **alice_level) as a, _client(
                url, MALLORY, "legacy", mallory) as m:
            await gateway.toolbox(wait=scaled(30))
            if generation == "legacy":
                await _legacy(lambda: a.set_logging_level("warning"))
            await _legacy(lambda: m.set_logging_level("debug"))
            for c in (a, m, a):
                result = await c.call_tool("modern__log", {})
                assert text(result) == "logged", result.content
            assert alice.logs == [("warning", "modern/modern", "warning line"),
                                  ("error", "modern/modern", "error line")] * 2
            assert mallory.logs == [(level, "modern/modern", f"{level} line")
                                    for level in ("debug", "info", "warning", "error")]
