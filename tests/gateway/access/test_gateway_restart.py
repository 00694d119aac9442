"""A restart never changes what a ref means: the gateway's transcript lives in memory, so a fresh
gateway starts its seqs at a new origin and a Message ref minted before the restart is refused
(naming the problem), never answered with the newer result that now holds its old seq. Stored
artifacts (a file store) still answer their Blob refs."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled
from byref.gateway import Gateway

pytestmark = pytest.mark.anyio


def _last_seq(gateway: Gateway) -> int:
    seq = gateway.scopes.state(gateway.scopes.stdio_scope).transcript.last_seq
    assert seq is not None
    return seq


async def test_a_message_ref_from_before_a_restart_is_refused(world: World) -> None:
    servers = world.need("filesystem")
    store = f"file://{world.root}/store"
    (world.files / "old.txt").write_text("before the restart\n")
    (world.files / "new.txt").write_text("after the restart\n" * 2_000)
    target = world.files / "copy.txt"

    async def read(client: Client, name: str) -> Any:
        result = await client.call_tool("call_tool", {
            "name": "filesystem__read_text_file", "arguments": {"path": str(world.files / name)}})
        assert not result.is_error, text(result)
        return text(result)

    with anyio.fail_after(scaled(90)):
        async with running(world, servers, store=store) as (gateway, server), Client(
                server) as client:
            assert await read(client, "old.txt") == "before the restart\n"
            old = {"$ref": {"type": "Message", "seq": _last_seq(gateway), "part": 0}}
            old_record = gateway.scopes.state(gateway.scopes.stdio_scope).transcript
        async with running(world, servers, store=store) as (gateway, server), Client(
                server) as client:
            placed = json.loads(await read(client, "new.txt"))
            await read(client, "old.txt")  # enough messages to reach any small old seq
            stale = await client.call_tool("call_tool", {
                "name": "filesystem__write_file",
                "arguments": {"path": str(target), "content": old}})
            assert stale.is_error, target.read_text()
            origin = gateway.scopes.state(gateway.scopes.stdio_scope).transcript.origin
            assert origin > old["$ref"]["seq"] >= old_record.origin
            assert text(stale) == (
                f"Tool 'filesystem__write_file' could not complete: message {old['$ref']['seq']} "
                f"is not in this conversation's record, which begins at message {origin} (the "
                "reference is from an earlier session or before a restart). Call the tool that "
                "produced it again to get a fresh reference.")
            assert not target.exists()
            # A placed result's Blob ref is the store's, not the transcript's: it still answers.
            kept = await client.call_tool("call_tool", {
                "name": "filesystem__write_file",
                "arguments": {"path": str(target), "content": placed["value"]}})
            assert not kept.is_error, text(kept)
    assert target.read_text() == "after the restart\n" * 2_000


async def test_no_gateway_code_assumes_seqs_start_at_zero(world: World) -> None:
    servers = world.need("filesystem")
    body = "alpha beta gamma\n" * 3_000
    (world.files / "a.txt").write_text(body)
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(
                server, mode="legacy") as client:  # declared its working set
            activated = await client.call_tool("activate_tool", {
                "names": ["filesystem__read_text_file"]})
            assert not activated.is_error, text(activated)
            names = {t.name for t in (await client.list_tools()).tools}
            assert "filesystem__read_text_file" in names  # the working set reads the record
            read = await client.call_tool("filesystem__read_text_file", {
                "path": str(world.files / "a.txt")})
            placed = json.loads(text(read))
            seq = _last_seq(gateway)
            assert seq > 1_000_000
            ref = {"$ref": {"type": "Message", "seq": seq, "part": 0, "field": "value"}}
            copied = await client.call_tool("call_tool", {
                "name": "filesystem__write_file",
                "arguments": {"path": str(world.files / "b.txt"), "content": ref}})
            assert not copied.is_error, text(copied)
            shown = await client.call_tool("present", {"ref": ref, "as": "text"})
            assert not shown.is_error, text(shown)
            assert json.loads(text(shown))["presented"] == placed["value"]["$ref"]["key"]
    assert (world.files / "b.txt").read_text() == body


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_blob_ref_keeps_its_meaning_across_a_restart_for_every_client_generation(
        world: World, mode: str) -> None:
    """Over HTTP a handshake-era client's conversation is its Mcp-Session-Id, which a restart
    ends; its stored results belong to its owner, so the next session after the restart (a new
    gateway process on the same file store and SQLite state) still redeems them, and another
    token still cannot."""
    import subprocess
    import sys

    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    alice, bob = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef0000"
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": world.need("filesystem"), "byref": {
        "store": f"file://{world.root}/store", "tokens": {
            alice: {"tenant": "acme", "principal": "alice"},
            bob: {"tenant": "acme", "principal": "bob"}}}}))
    (world.files / "note.txt").write_text("kept across the restart\n" * 2_000)

    def client(url: str, token: str) -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"Authorization": f"Bearer {token}"})), mode=mode)

    async def call(url: str, token: str, name: str, arguments: dict[str, Any]) -> Any:
        async with client(url, token) as c:
            return await c.call_tool("call_tool", {"name": name, "arguments": arguments})

    blob: Any = None
    with anyio.fail_after(scaled(120)), world.log.open("a") as errlog:
        for life in ("before", "after"):
            async with await anyio.open_process(
                    [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config),
                     "--transport", "http", "--port", "0"],
                    stderr=subprocess.PIPE, stdout=errlog) as process:
                try:
                    assert process.stderr is not None
                    seen = b""
                    while b"listening on " not in seen or not seen.endswith(b"\n"):
                        seen += await process.stderr.receive()
                    url = seen.decode().split("listening on ", 1)[1].split()[0]
                    if life == "before":
                        read = await call(url, alice, "filesystem__read_text_file",
                                          {"path": str(world.files / "note.txt")})
                        blob = json.loads(text(read))["value"]
                    else:
                        stolen = await call(url, bob, "filesystem__write_file", {
                            "path": str(world.files / "bob.txt"), "content": blob})
                        assert stolen.is_error and "is not available" in text(stolen)
                        kept = await call(url, alice, "filesystem__write_file", {
                            "path": str(world.files / "copy.txt"), "content": blob})
                        assert not kept.is_error, text(kept)
                finally:
                    process.terminate()
    assert (world.files / "copy.txt").read_text() == "kept across the restart\n" * 2_000
    assert not (world.files / "bob.txt").exists()
