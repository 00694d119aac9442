"""Gateway conversation state: refs of every kind minted before a restart resolve after it (file
store + the SQLite default, and PostgreSQL + S3), the working set comes back with the record, a
ref into a conversation that expired is refused saying so, each MCP session is its own
conversation unless the config shares one per principal, and closing a session releases it."""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import pytest
from _gateway_rig import World, ref_line_of, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _s3 import moto_s3
from _waits import scaled
from byref.conversations import MemoryConversations
from byref.gateway import Gateway, build_server
from byref.gateway.config.file import parse_config
from byref.jsonview import encode
from byref.refs import handle_envelope
from byref.resolve import handle_absent
from doubles.clock import ManualClock

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"}}
READ, WRITE = "filesystem__read_text_file", "filesystem__write_file"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3("byref-state") as endpoint:
        yield endpoint




@asynccontextmanager
async def resumed(world: World, servers: dict[str, Any], resume: str | None,
                  **options: Any) -> AsyncIterator[tuple[Gateway, Any]]:
    """A gateway as `byref gateway --conversation ID` runs it (None: a new conversation)."""
    config = dataclasses.replace(parse_config({"mcpServers": servers, "byref": options},
                                              source="test"), stdio_conversation=resume)
    with world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway:
            yield gateway, build_server(gateway)


def _last_seq(gateway: Gateway) -> int:
    seq = gateway.scopes.state(gateway.scopes.stdio_scope).transcript.last_seq
    assert seq is not None
    return seq


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert not result.is_error, text(result)
    return text(result)


@pytest.mark.parametrize("where", ["file+sqlite", "postgres+s3"])
async def test_refs_of_every_kind_resolve_after_a_restart(
        world: World, where: str, request: pytest.FixtureRequest) -> None:
    servers = world.need("filesystem")
    if where == "file+sqlite":
        options: dict[str, Any] = {"store": f"file://{world.root}/store"}
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        options = {"store": f"s3://byref-state/{secrets.token_hex(4)}?endpoint={endpoint}",
                   "state": request.getfixturevalue("postgres_state")}
    options["conversation"] = "session"
    small, big = "a small result\n", "a placed result line\n" * 3_000
    (world.files / "small.txt").write_text(small)
    (world.files / "big.txt").write_text(big)
    items = [{"id": i, "status": ("open", "closed")[i % 2]} for i in range(2_000)]
    (world.files / "items.json").write_text(json.dumps(items))
    expected = encode([row for row in items if row["status"] == "open"])
    conv = "resumed-conversation"
    with anyio.fail_after(scaled(120)):
        async with resumed(world, servers, conv, **options) as (gateway, server), Client(
                server) as client:
            activated = await client.call_tool("activate_tool", {"names": [WRITE]})
            assert not activated.is_error, text(activated)
            read = await client.call_tool("call_tool", {
                "name": READ, "arguments": {"path": str(world.files / "small.txt")}})
            assert text(read) == small
            inline = {"$ref": {"type": "Message", "seq": _last_seq(gateway), "part": 0}}
            shown = ref_line_of(read)  # the handle its ref line shows: durable as the record
            assert shown == handle_envelope(_last_seq(gateway))
            placed = json.loads(await _call(client, READ, {"path": str(world.files / "big.txt")}))
            through = {"$ref": {"type": "Message", "seq": _last_seq(gateway), "part": 0,
                                "field": "value"}}
            blob = placed["value"]
            assert blob["$ref"]["type"] == "Blob"
            # A local tool's result: a server recipe (JsonQuery) shown as a Message ref.
            stored = json.loads(await _call(client, READ, {"path": str(world.files /
                                                                     "items.json")}))
            query = await client.call_tool("query_json", {
                "source": stored["value"], "filter": [{"field": "status", "eq": "open"}]})
            assert not query.is_error, text(query)
            recipe = json.loads(text(query))["value"]
            assert recipe["$ref"]["type"] == "Message" and "JsonQuery" not in text(query)
            before = gateway.scopes.state(gateway.scopes.stdio_scope)
            origin, declared = before.transcript.origin, before.declared
            assert WRITE in declared
        async with resumed(world, servers, conv, **options) as (gateway, server), Client(
                server, mode="legacy") as client:  # declared its resumed working set
            state = gateway.scopes.state(gateway.scopes.stdio_scope)
            assert state.transcript.storage == "state" and state.transcript.origin == origin
            assert state.declared == declared  # the working set came back with the record
            assert WRITE in {t.name for t in (await client.list_tools()).tools}
            for n, (ref, want) in enumerate([(inline, small.encode()), (through, big.encode()),
                                              (blob, big.encode()), (recipe, expected),
                                              (shown, small.encode())]):
                target = world.files / f"copy{n}.txt"
                result = await client.call_tool(WRITE, {"path": str(target), "content": ref})
                assert not result.is_error, text(result)
                assert target.read_bytes() == want, n
        # Without --conversation a new process is a new conversation: the old seqs are refused.
        async with resumed(world, servers, None, **options) as (gateway, server), Client(
                server) as client:
            stale = await client.call_tool("call_tool", {"name": WRITE, "arguments": {
                "path": str(world.files / "stale.txt"), "content": inline}})
            assert stale.is_error
            assert f"message {inline['$ref']['seq']} is not in this conversation's record" in (
                text(stale))
            gone = await client.call_tool("call_tool", {"name": WRITE, "arguments": {
                "path": str(world.files / "stale.txt"), "content": shown}})
            assert gone.is_error and handle_absent(shown["$ref"]) in text(gone)
            assert not (world.files / "stale.txt").exists()


async def test_a_ref_into_an_expired_conversation_is_refused_saying_so(world: World) -> None:
    servers = world.need("filesystem")
    (world.files / "a.txt").write_text("kept for a while\n")
    clock = ManualClock()
    state = MemoryConversations(ttl=600, clock=clock)
    config = parse_config({"mcpServers": servers}, source="test")
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog, state=state) as gateway, Client(
                build_server(gateway)) as client:
            assert await _call(client, READ, {"path": str(world.files / "a.txt")}) == (
                "kept for a while\n")
            seq = _last_seq(gateway)
            ref = {"$ref": {"type": "Message", "seq": seq, "part": 0}}
            clock.now += 599  # idle, but within the ttl: still answers
            await _call(client, WRITE, {"path": str(world.files / "b.txt"), "content": ref})
            assert (world.files / "b.txt").read_text() == "kept for a while\n"
            clock.now += 601  # idle past the ttl since the last call
            expired = await client.call_tool("call_tool", {"name": WRITE, "arguments": {
                "path": str(world.files / "c.txt"), "content": ref}})
            assert expired.is_error
            assert text(expired) == (
                f"Tool {WRITE!r} could not complete: message {seq} belonged to this "
                "conversation's earlier record, which expired (it sat idle past its retention) "
                "and was deleted. Call the tool that produced it again to get a fresh reference.")
            assert not (world.files / "c.txt").exists()
            assert gateway.scopes.state(gateway.scopes.stdio_scope).transcript.origin > seq
    # Closed: the gateway saved the record into the state it was given (the owner's to keep).
    assert gateway.scopes.all() == []
    kept = state.find(gateway.scopes.stdio_scope)
    assert kept is not None and kept.length == 2 and kept.origin > seq


def serving(world: World, servers: dict[str, Any], **options: Any
            ) -> AbstractAsyncContextManager[tuple[Gateway, str]]:
    return served(world, servers, tokens=TOKENS, **options)


def client(url: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


async def _released(gateway: Gateway, count: int) -> None:
    with anyio.fail_after(scaled(10)):  # the SDK tears a closed session down in its own task
        while len(gateway.scopes.all()) != count:
            await anyio.sleep(0.01)


@pytest.mark.parametrize("mode", ["session", "principal"])
async def test_sessions_have_their_own_conversation_unless_shared(world: World,
                                                                  mode: str) -> None:
    servers = world.need("filesystem")
    (world.files / "n.txt").write_text("one session's note\n")
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, conversation=mode) as (gateway, url):
            async with client(url) as first, client(url) as second:
                activated = await first.call_tool("activate_tool", {"names": [READ]})
                assert not activated.is_error, text(activated)
                read = await first.call_tool(READ, {"path": str(world.files / "n.txt")})
                assert not read.is_error, text(read)
                (mine,) = [s for s in gateway.scopes.all() if s.transcript.last_seq is not None]
                ref = {"$ref": {"type": "Message", "seq": mine.transcript.last_seq, "part": 0}}
                names = {t.name for t in (await second.list_tools()).tools}
                copied = await second.call_tool("call_tool", {"name": WRITE, "arguments": {
                    "path": str(world.files / "copy.txt"), "content": ref}})
                if mode == "session":
                    assert READ not in names  # its own working set: nothing activated there
                    assert copied.is_error, "a ref crossed from one session to another"
                    assert not (world.files / "copy.txt").exists()
                    assert len(gateway.scopes.all()) == 2
                else:
                    assert READ in names  # one conversation: the principal's working set
                    assert not copied.is_error, text(copied)
                    assert (world.files / "copy.txt").read_text() == "one session's note\n"
                    assert len(gateway.scopes.all()) == 1
            # The last session of a conversation to close released it from memory. A session's
            # own conversation in memory state, which no later session could reach, was deleted
            # with it; the principal's stays for the principal's next session.
            await _released(gateway, 0)
            kept = gateway.scopes.conversations.find(mine.scope)
            if mode == "session":
                assert kept is None
            else:
                assert kept is not None and kept.length == 6  # activate, read, copy: 3 calls


class Flaky(MemoryConversations):
    """State whose next `fail` appends fail as an unreachable database's would."""

    fail = 0

    def append(self, *args: Any, **kw: Any) -> None:
        if self.fail:
            self.fail -= 1
            from byref.conversations import ConversationError

            raise ConversationError("the database went away")
        super().append(*args, **kw)


async def test_a_failed_save_keeps_the_record_and_goes_with_the_next_call(
        world: World, capfd: pytest.CaptureFixture[str]) -> None:
    servers = world.need("filesystem")
    (world.files / "a.txt").write_text("still answered\n")
    state = Flaky()
    config = parse_config({"mcpServers": servers}, source="test")
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog, state=state) as gateway, Client(
                build_server(gateway)) as client:
            state.fail = 1
            assert await _call(client, READ, {"path": str(world.files / "a.txt")}) == (
                "still answered\n")
            scope = gateway.scopes.stdio_scope
            saved = state.find(scope)
            assert saved is not None and saved.length == 0  # not saved …
            seq = _last_seq(gateway)
            ref = {"$ref": {"type": "Message", "seq": seq, "part": 0}}
            await _call(client, WRITE, {"path": str(world.files / "b.txt"), "content": ref})
            assert (world.files / "b.txt").read_text() == "still answered\n"  # … yet answered
            saved = state.find(scope)
            assert saved is not None and saved.length == 4  # both calls, in the next batch
    assert (f"byref gateway: conversation {str(scope)!r} not saved (kept in memory, retried "
            "with the next call): the database went away") in capfd.readouterr().err
