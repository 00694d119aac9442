"""byref's stored artifacts as MCP resources, in the caller's scope only: resources/list names the
caller's own `byref:artifact/<ref>` URIs to a handshake-era client (a 2026-07-28 client's list
never changes with its calls: it reads them by URI), the template `byref:artifact/{ref}` is
listed, and
resources/read returns the stored bytes (text or base64); another scope's ref reads exactly as
one that never existed. Over HTTP with two bearer tokens, and over stdio with two scopes (two
conversations of one scope share its owner's artifacts) on one file store, through real `byref
gateway` processes and the official client."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, running
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from _waits import scaled
from byref.gateway.passthrough.uris import ARTIFACT_PREFIX, artifact_ref, split

pytestmark = pytest.mark.anyio

ALICE = "a-long-random-token-for-alice-0001"
BOB = "a-long-random-token-for-bob-00000002"
NEVER = "art_" + "Z" * 22


def _gateway(*args: str) -> list[str]:
    return [sys.executable, "-m", "byref.cli", "gateway", *args]


def _config(world: World, **byref: Any) -> Path:
    path = world.root / "gateway.json"
    path.write_text(json.dumps({"mcpServers": {"media": world.fixture("media_server.py")},
                                "byref": byref}))
    return path


async def _screenshot(client: Client) -> tuple[str, bytes]:
    """(the stored screenshot's ref, the image bytes the client was shown)."""
    result = await client.call_tool("call_tool", {"name": "media__screenshot",
                                                  "arguments": {"size": 3000}})
    assert not result.is_error
    _caption, marker, image, _line = result.content  # each block in its place
    assert isinstance(marker, types.TextContent) and isinstance(image, types.ImageContent)
    return json.loads(marker.text)["value"]["$ref"]["key"], base64.b64decode(image.data)


async def _long_note(client: Client) -> str:
    result = await client.call_tool("call_tool", {"name": "media__long_note", "arguments": {}})
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    key: str = json.loads(block.text)["value"]["$ref"]["key"]
    return key


async def _mine(client: Client) -> dict[str, types.Resource]:
    listed = await client.list_resources()
    return {str(r.uri): r for r in listed.resources if str(r.uri).startswith(ARTIFACT_PREFIX)}


async def _refused(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return str(caught.value.error.message)


def test_the_artifact_uri_cannot_be_taken_for_an_upstream_one() -> None:
    uri = ARTIFACT_PREFIX + NEVER
    assert split(uri, ["artifact", "byref", "media"]) is None  # never `byref://<server>/...`
    assert artifact_ref(uri) == NEVER
    assert artifact_ref(f"byref://artifact/{NEVER}") is None  # an upstream named 'artifact'


@asynccontextmanager
async def _http(world: World) -> AsyncIterator[str]:
    config = _config(world, tokens={ALICE: {"tenant": "t", "principal": "alice"},
                                    BOB: {"tenant": "t", "principal": "bob"}})
    with world.log.open("a") as errlog:
        async with await anyio.open_process(
                _gateway("--config", str(config), "--transport", "http", "--port", "0"),
                stderr=subprocess.PIPE, stdout=errlog) as process:
            try:
                assert process.stderr is not None
                seen = b""
                while b"listening on " not in seen or not seen.endswith(b"\n"):
                    seen += await process.stderr.receive()
                yield seen.decode().split("listening on ", 1)[1].split()[0]
            finally:
                process.terminate()


def _as(url: str, token: str, mode: str = "legacy") -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)  # type: ignore[arg-type]


async def test_over_http_each_token_lists_and_reads_only_its_own_artifacts(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with _http(world) as url, _as(url, ALICE) as alice, _as(url, BOB) as bob:
            ref, shown = await _screenshot(alice)
            note = await _long_note(alice)
            uri = ARTIFACT_PREFIX + ref
            mine = await _mine(alice)
            assert set(mine) == {uri, ARTIFACT_PREFIX + note}
            assert (mine[uri].name, mine[uri].mime_type, mine[uri].size) == (
                ref, "image/png", 3000)
            (blob,) = (await alice.read_resource(uri)).contents
            assert isinstance(blob, types.BlobResourceContents)
            assert (str(blob.uri), blob.mime_type) == (uri, "image/png")
            assert base64.b64decode(blob.blob) == shown
            (text,) = (await alice.read_resource(ARTIFACT_PREFIX + note)).contents
            assert isinstance(text, types.TextResourceContents)
            assert text.text == "line of the long note\n" * 400

            templates = (await alice.list_resource_templates()).resource_templates
            assert ARTIFACT_PREFIX + "{ref}" in [t.uri_template for t in templates]
            template = types.ResourceTemplateReference(type="ref/resource",
                                                       uri=ARTIFACT_PREFIX + "{ref}")
            done = await alice.complete(template, {"name": "ref", "value": "art_"})
            assert sorted(done.completion.values) == sorted([ref, note])
            done = await alice.complete(template, {"name": "ref", "value": ref[:12]})
            assert ref in done.completion.values and all(
                v.startswith(ref[:12]) for v in done.completion.values)
            assert (await bob.complete(template, {"name": "ref", "value": ""})
                    ).completion.values == []

            # Bob's scope: Alice's artifacts are not listed, and reading one answers exactly as
            # a ref that never existed.
            assert await _mine(bob) == {}
            stolen = await _refused(bob, uri)
            assert stolen == (f"Artifact {ref!r} is not available in this conversation: it is "
                              "missing, expired, or was never stored under this scope.")
            assert await _refused(bob, ARTIFACT_PREFIX + NEVER) == stolen.replace(ref, NEVER)
            bob_ref, _ = await _screenshot(bob)
            assert set(await _mine(bob)) == {ARTIFACT_PREFIX + bob_ref}
            assert ARTIFACT_PREFIX + bob_ref not in await _mine(alice)
            assert await _refused(alice, ARTIFACT_PREFIX + "art_short") == (
                f"Resource {ARTIFACT_PREFIX + 'art_short'!r} names no artifact: after "
                f"{ARTIFACT_PREFIX!r} comes a ref, 'art_' followed by 22 letters or digits.")
            async with _as(url, ALICE, mode="auto") as modern:  # 2026-07-28: read, not listed
                assert modern.protocol_version == "2026-07-28"
                assert await _mine(modern) == {}
                (again,) = (await modern.read_resource(uri)).contents
                assert isinstance(again, types.BlobResourceContents) and again.blob == blob.blob


@asynccontextmanager
async def _stdio(world: World, conversation: str, scope: str = "me") -> AsyncIterator[Client]:
    config = _config(world, scope=scope)
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store",
                              "--conversation", conversation)
    with world.log.open("a") as errlog:
        async with Client(stdio_client(StdioServerParameters(
                command=command, args=args, env=dict(os.environ)), errlog=errlog),
                mode="legacy") as client:  # its resources/list names its artifacts
            yield client


async def test_over_stdio_an_owner_reads_its_artifacts_and_no_other_scope(world: World) -> None:
    with anyio.fail_after(scaled(90)):
        async with _stdio(world, "first") as first:
            ref, shown = await _screenshot(first)
            uri = ARTIFACT_PREFIX + ref
            assert set(await _mine(first)) == {uri}
            (blob,) = (await first.read_resource(uri)).contents
            assert isinstance(blob, types.BlobResourceContents)
            assert base64.b64decode(blob.blob) == shown
        # Another conversation on the same file store: the same local owner, whose stored
        # results outlive a process (issue 39.C), so it reads them too.
        async with _stdio(world, "second") as second:
            assert set(await _mine(second)) == {uri}
            (blob,) = (await second.read_resource(uri)).contents
            assert isinstance(blob, types.BlobResourceContents)
        # Another scope (`--scope`) on the same store: another owner, to whom the ref is absent.
        async with _stdio(world, "third", scope="them") as other:
            assert await _mine(other) == {}
            assert (await _refused(other, uri)).startswith(f"Artifact {ref!r} is not available")
        # The first conversation, resumed by a new process, still reads its own.
        async with _stdio(world, "first") as again:
            (blob,) = (await again.read_resource(uri)).contents
            assert isinstance(blob, types.BlobResourceContents)
            assert base64.b64decode(blob.blob) == shown


async def test_an_artifact_subscription_is_accepted_for_ones_own_only(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": world.fixture("media_server.py")}) as (
                _gateway, server), Client(server, mode="legacy") as client:
            ref, _ = await _screenshot(client)
            with warnings.catch_warnings():  # subscribe is handshake-era only
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(ARTIFACT_PREFIX + ref)  # bytes never change
                await client.unsubscribe_resource(ARTIFACT_PREFIX + ref)
                with pytest.raises(MCPError) as caught:
                    await client.subscribe_resource(ARTIFACT_PREFIX + NEVER)
            assert caught.value.error.message == (
                f"Artifact {NEVER!r} is not available in this conversation: it is missing, "
                "expired, or was never stored under this scope.")
