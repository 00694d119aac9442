"""A client host that declares `dev.byref/refs`, against the gateway and directly against an SDK
server using the extension, both over HTTP with two owners: a 20 MB result's ref fetched in
ranges and through its download URL, byte-exact, its bytes never in the model-visible text; a
5 MB file uploaded in parts and delivered to the upstream's tool byte-exact; another owner's ref
and URL refused as absent; an expired URL refused."""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from _refs_rig import ALICE, BOB, gateway_http, sdk_http
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from _waits import scaled
from byref.battery import OffsetClock
from byref.extension.conformance.probe import add_probe_tools, probe_digest
from byref.extension.host import MAX_CHUNK_BYTES, MAX_READ_BYTES
from byref.extension.protocol import IDENTIFIER, announced
from byref.store.adapters.memory import MemoryStore

pytestmark = pytest.mark.anyio

BIG = 20_000_000
UPLOAD = 5 * 1024 * 1024


def _client(url: str, token: str, *, declare: bool = True) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), mode="legacy",
        extensions=[advertise(IDENTIFIER, {})] if declare else None,
        read_timeout_seconds=scaled(60))


async def _ask(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    sent = types.Request[dict[str, Any], str](method=f"{IDENTIFIER}/{method}", params=params)
    return await client.session.send_request(sent, TypeAdapter(dict[str, Any]))


async def _refused(client: Client, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(MCPError) as caught:
        await _ask(client, method, params)
    return f"{caught.value.error.code} {caught.value.error.message}"


async def _get(url: str, token: str) -> tuple[int, bytes]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        answer = await http.get(url)
        return answer.status_code, answer.content


def _text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


@asynccontextmanager
async def _serving(impl: str, store: MemoryStore) -> AsyncIterator[tuple[str, str, str]]:
    if impl == "gateway":
        async with gateway_http(store) as (_gateway, url):
            yield url, "probe__emit", "probe__digest"
    else:
        async with sdk_http(store) as url:
            yield url, "emit", "digest"


@pytest.mark.parametrize("impl", ["gateway", "sdk"])
async def test_a_host_fetches_uploads_and_is_refused_another_owners_bytes(impl: str) -> None:
    clock = OffsetClock()
    store = MemoryStore(clock=clock)
    with anyio.fail_after(scaled(240)):
        async with _serving(impl, store) as (url, emit, digest), _client(url, ALICE) as alice, \
                _client(url, BOB) as bob, _client(url, ALICE, declare=False) as plain:
            result = await alice.call_tool(emit, {"size": BIG})
            seen = _text(result)
            (entry,) = announced(result.meta)
            ref, key = entry["ref"], entry["ref"]["$ref"]["key"]
            assert key in seen and len(seen) < 5_000, len(seen)
            assert "the bytes stay in the store" * 3 not in seen  # a preview, not the value
            # Without the extension the model sees the same preview (its own key and seq) and
            # the client no `_meta` of ours: the host's bytes are the extension's alone.
            without = await plain.call_tool(emit, {"size": BIG})
            assert IDENTIFIER not in (without.meta or {})
            assert abs(len(_text(without)) - len(seen)) < 40, (_text(without), seen)
            stat = await _ask(alice, "stat", {"ref": ref})
            assert (stat["bytes"], stat["sha256"]) == (BIG, probe_digest(BIG))

            got, offset, reads = bytearray(), 0, 0
            while True:
                part = await _ask(alice, "read", {"ref": ref, "offset": offset,
                                                  "length": MAX_READ_BYTES})
                got += base64.b64decode(part["data"])
                offset, reads = offset + part["length"], reads + 1
                if part["eof"]:
                    break
            assert reads == -(-BIG // MAX_READ_BYTES)
            assert hashlib.sha256(got).hexdigest() == probe_digest(BIG)

            link = await _ask(alice, "authorizeDownload", {"ref": ref, "ttlSeconds": 60})
            status, body = await _get(link["url"], ALICE)
            assert status == 200 and len(body) == BIG
            assert hashlib.sha256(body).hexdigest() == probe_digest(BIG)

            # Another owner: the ref and the URL are absent, in the words of a key never minted.
            never = "art_" + "Z" * 22
            assert (await _refused(bob, "stat", {"ref": ref})).replace(key, "<k>") == (
                await _refused(bob, "stat", {"ref": {"$ref": {"type": "Blob", "key": never}}})
            ).replace(never, "<k>")
            assert (await _refused(bob, "read", {"ref": ref})).startswith("-32002 ")
            foreign = await _get(link["url"], BOB)
            unknown = await _get(link["url"].rsplit("/", 1)[0] + "/" + never, ALICE)
            assert foreign == unknown and foreign[0] == 404, foreign

            # Expired: the store's clock passes the URL's life.
            clock.offset += 61
            expired = await _get(link["url"], ALICE)
            assert expired == unknown, expired

            # Upload: 5 MB of text in parts, delivered to the upstream's tool byte-exact.
            data = base64.b64encode(random.Random(7).randbytes(UPLOAD))[:UPLOAD]
            parts = []
            for at in range(0, UPLOAD - MAX_CHUNK_BYTES, MAX_CHUNK_BYTES):
                chunk = base64.b64encode(data[at:at + MAX_CHUNK_BYTES]).decode()
                parts.append((await _ask(alice, "upload", {"data": chunk, "final": False}))["part"])
            rest = base64.b64encode(data[len(parts) * MAX_CHUNK_BYTES:]).decode()
            up = await _ask(alice, "upload", {"data": rest, "parts": parts,
                                              "mediaType": "text/plain", "name": "five.txt"})
            assert (up["bytes"], up["sha256"]) == (UPLOAD, hashlib.sha256(data).hexdigest())
            delivered = await alice.call_tool(digest, {"data": up["ref"]})
            assert not delivered.is_error, _text(delivered)
            assert hashlib.sha256(data).hexdigest() in _text(delivered)
            refused = await bob.call_tool(digest, {"data": up["ref"]})
            assert refused.is_error and up["ref"]["$ref"]["key"] in _text(refused)
            print(f"\n{impl}: the model saw {len(seen):,} characters for a {BIG:,}-byte result "
                  f"({len(_text(without)):,} without the extension); the host read it in "
                  f"{reads} ranges and through one URL")


async def test_without_byref_the_model_sees_every_byte() -> None:
    """The baseline the figures compare with: the same probe server, plain (no gateway, no
    extension), answers the 20 MB result inline."""
    from mcp.server.mcpserver import MCPServer

    server = add_probe_tools(MCPServer("plain"))
    with anyio.fail_after(scaled(120)):
        async with Client(server) as client:
            seen = _text(await client.call_tool("emit", {"size": BIG}))
    assert len(seen) == BIG
    print(f"\nplain: the model saw {len(seen):,} characters")
