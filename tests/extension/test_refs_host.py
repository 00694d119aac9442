"""A client host that declares `dev.byref/refs`, against the gateway and directly against an SDK
server using the extension, both over HTTP with two owners: a 20 MB result's ref fetched in
ranges and through its download URL, byte-exact, its bytes never in the model-visible text; a
5 MB file uploaded in parts and delivered to the upstream's tool byte-exact; another owner's ref
and URL refused as absent; an expired URL refused."""

from __future__ import annotations

import base64
import hashlib
import random

import anyio
import pytest
from _refs_rig import ALICE, BOB, ask, client, get, refused_as, serving, text
from mcp import Client

from _waits import scaled
from byref.battery import OffsetClock
from byref.extension.conformance.probe import add_probe_tools, probe_digest
from byref.extension.host import MAX_CHUNK_BYTES, MAX_READ_BYTES
from byref.extension.protocol import IDENTIFIER, announced
from byref.store.adapters.memory import MemoryStore

pytestmark = pytest.mark.anyio

BIG = 20_000_000
UPLOAD = 5 * 1024 * 1024


@pytest.mark.parametrize("impl", ["gateway", "sdk"])
async def test_a_host_fetches_uploads_and_is_refused_another_owners_bytes(impl: str) -> None:
    clock = OffsetClock()
    store = MemoryStore(clock=clock)
    with anyio.fail_after(scaled(240)):
        async with serving(impl, store) as (url, emit, digest), client(url, ALICE) as alice, \
                client(url, BOB) as bob, client(url, ALICE, declare=False) as plain:
            result = await alice.call_tool(emit, {"size": BIG})
            seen = text(result)
            (entry,) = announced(result.meta)
            ref, key = entry["ref"], entry["ref"]["$ref"]["key"]
            assert key in seen and len(seen) < 5_000, len(seen)
            assert "the bytes stay in the store" * 3 not in seen  # a preview, not the value
            # Without the extension the model sees the same preview (its own key and seq) and
            # the client no `_meta` of ours: the host's bytes are the extension's alone.
            without = await plain.call_tool(emit, {"size": BIG})
            assert IDENTIFIER not in (without.meta or {})
            assert abs(len(text(without)) - len(seen)) < 40, (text(without), seen)
            stat = await ask(alice, "stat", {"ref": ref})
            assert (stat["bytes"], stat["sha256"]) == (BIG, probe_digest(BIG))

            got, offset, reads = bytearray(), 0, 0
            while True:
                part = await ask(alice, "read", {"ref": ref, "offset": offset,
                                                  "length": MAX_READ_BYTES})
                got += base64.b64decode(part["data"])
                offset, reads = offset + part["length"], reads + 1
                if part["eof"]:
                    break
            assert reads == -(-BIG // MAX_READ_BYTES)
            assert hashlib.sha256(got).hexdigest() == probe_digest(BIG)

            link = await ask(alice, "authorizeDownload", {"ref": ref, "ttlSeconds": 60})
            status, body = await get(link["url"], ALICE)
            assert status == 200 and len(body) == BIG
            assert hashlib.sha256(body).hexdigest() == probe_digest(BIG)

            # Another owner: the ref and the URL are absent, in the words of a key never minted.
            never = "art_" + "Z" * 22
            assert (await refused_as(bob, "stat", {"ref": ref})).replace(key, "<k>") == (
                await refused_as(bob, "stat", {"ref": {"$ref": {"type": "Blob", "key": never}}})
            ).replace(never, "<k>")
            assert (await refused_as(bob, "read", {"ref": ref})).startswith("-32002 ")
            foreign = await get(link["url"], BOB)
            unknown = await get(link["url"].rsplit("/", 1)[0] + "/" + never, ALICE)
            assert foreign == unknown and foreign[0] == 404, foreign

            # Expired: the store's clock passes the URL's life.
            clock.offset += 61
            expired = await get(link["url"], ALICE)
            assert expired == unknown, expired

            # Upload: 5 MB of text in parts, delivered to the upstream's tool byte-exact.
            data = base64.b64encode(random.Random(7).randbytes(UPLOAD))[:UPLOAD]
            parts = []
            for at in range(0, UPLOAD - MAX_CHUNK_BYTES, MAX_CHUNK_BYTES):
                chunk = base64.b64encode(data[at:at + MAX_CHUNK_BYTES]).decode()
                parts.append((await ask(alice, "upload", {"data": chunk, "final": False}))["part"])
            rest = base64.b64encode(data[len(parts) * MAX_CHUNK_BYTES:]).decode()
            up = await ask(alice, "upload", {"data": rest, "parts": parts,
                                              "mediaType": "text/plain", "name": "five.txt"})
            assert (up["bytes"], up["sha256"]) == (UPLOAD, hashlib.sha256(data).hexdigest())
            delivered = await alice.call_tool(digest, {"data": up["ref"]})
            assert not delivered.is_error, text(delivered)
            assert hashlib.sha256(data).hexdigest() in text(delivered)
            refused = await bob.call_tool(digest, {"data": up["ref"]})
            assert refused.is_error and up["ref"]["$ref"]["key"] in text(refused)
            print(f"\n{impl}: the model saw {len(seen):,} characters for a {BIG:,}-byte result "
                  f"({len(text(without)):,} without the extension); the host read it in "
                  f"{reads} ranges and through one URL")


async def test_without_byref_the_model_sees_every_byte() -> None:
    """The baseline the figures compare with: the same probe server, plain (no gateway, no
    extension), answers the 20 MB result inline."""
    from mcp.server.mcpserver import MCPServer

    server = add_probe_tools(MCPServer("plain"))
    with anyio.fail_after(scaled(120)):
        async with Client(server) as client:
            seen = text(await client.call_tool("emit", {"size": BIG}))
    assert len(seen) == BIG
    print(f"\nplain: the model saw {len(seen):,} characters")
