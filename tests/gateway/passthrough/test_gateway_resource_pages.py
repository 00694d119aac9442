"""A resources/read past `READ_BYTES` is answered by pages, never in one piece (defect 9 of
[trust III]: a 30 MiB upstream resource went out as one 36.6 MB answer).

A real upstream process (`passthrough_server.py`) serves `big://<MiB>` and `bigtext://<MiB>`; a
read of 10 MiB answers a short index (stored in the caller's scope), each page is at most
`READ_BYTES`, the pages put together are the bytes (a text page cut before a character decodes
alone), a page past the last or not a number is refused saying what fits, and a read under the
bound passes whole as before. byref's own large artifact, read whole, answers its pages too.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, running
from mcp import Client
from mcp.shared.exceptions import MCPError

from byref.gateway.passthrough.bounded import READ_BYTES, page_uri
from byref.gateway.passthrough.uris import ARTIFACT_PREFIX, namespaced

MIB = 1024 * 1024
pytestmark = pytest.mark.anyio


def _size(result: types.ReadResourceResult) -> int:
    return len(result.model_dump_json(by_alias=True))


async def _pages(client: Client, first: str, count: int) -> list[Any]:
    got = []
    for n in range(1, count + 1):
        read = await client.read_resource(first.replace("?page=1", f"?page={n}"))
        (part,) = read.contents
        got.append(part)
        assert _size(read) < READ_BYTES * 4 // 3 + 4096  # base64 of a page, and the envelope
    return got


async def test_a_large_upstream_read_is_answered_by_pages(world: World) -> None:
    with anyio.fail_after(120):
        async with running(world, {"many": world.fixture("passthrough_server.py", timeout=30)}
                           ) as (_gateway, server), Client(server, mode="legacy") as client:
            asked = namespaced("many", "big://10")
            read = await client.read_resource(asked)
            assert _size(read) < 4096, _size(read)
            (index,) = read.contents
            assert isinstance(index, types.TextResourceContents)
            assert index.text.startswith(f"{asked!r} is 10,485,760 bytes, past the 4,194,304 "
                                         "one read answers; read it by pages:"), index.text
            assert read.meta is not None
            (listed,) = read.meta["byref/pages"]
            assert (listed["bytes"], listed["pages"]) == (10 * MIB, 3)
            assert listed["first"] in index.text
            parts = await _pages(client, listed["first"], 3)
            assert all(isinstance(p, types.BlobResourceContents) for p in parts)
            data = b"".join(base64.b64decode(p.blob) for p in parts)
            assert data == bytes(i % 251 for i in range(10 * MIB))

            ref = listed["ref"]  # byref's own artifact now: read whole, it answers its pages
            again = await client.read_resource(ARTIFACT_PREFIX + ref)
            assert again.meta is not None and again.meta["byref/pages"][0]["pages"] == 3
            with pytest.raises(MCPError) as past:
                await client.read_resource(page_uri(ref, 4))
            assert past.value.error.message == (
                "Page 4 is past the last: this artifact has 3 pages (?page=1 to ?page=3).")
            with pytest.raises(MCPError) as zero:
                await client.read_resource(f"{ARTIFACT_PREFIX}{ref}?page=0")
            assert zero.value.error.message == (
                f"Page '0' of artifact {ref!r} is not a page number: pass ?page=1 for the first.")

            text = await client.read_resource(namespaced("many", "bigtext://9"))
            assert text.meta is not None
            (listed,) = text.meta["byref/pages"]
            parts = await _pages(client, listed["first"], listed["pages"])
            assert all(isinstance(p, types.TextResourceContents) for p in parts)
            assert "".join(p.text for p in parts) == "é€ab" * (9 * MIB // 7)

            small = await client.read_resource(namespaced("many", "big://0.5"))
            (whole,) = small.contents
            assert isinstance(whole, types.BlobResourceContents)
            assert len(base64.b64decode(whole.blob)) == MIB // 2
