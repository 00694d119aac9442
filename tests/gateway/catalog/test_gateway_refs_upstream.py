"""An upstream that has `dev.byref/refs` (an SDK server made so by `refs_server`) behind the
gateway: the gateway declares the extension to it, keeps the preview the server wrote (the value
is not stored a second time) and passes the server's own ref back to it untouched, so its tool
receives the exact bytes; a key the server never minted for this caller is refused as absent."""

from __future__ import annotations

import re

import anyio
import pytest
from _gateway_rig import fixtures_gateway, text
from mcp import Client

from _waits import scaled
from byref.extension.conformance.probe import probe_digest

pytestmark = pytest.mark.anyio


async def test_an_upstreams_own_refs_pass_through_unwrapped() -> None:
    size = 300_000
    with anyio.fail_after(scaled(60)):
        async with fixtures_gateway(None, {"sdk": "refs_sdk_server.py"}) as (gateway, server), \
                Client(server) as client:
            made = await client.call_tool("call_tool", {"name": "sdk__emit",
                                                        "arguments": {"size": size}})
            shown = text(made)
            assert not made.is_error and len(shown) < 6_000, shown
            keys = set(re.findall(r"art_[0-9A-Za-z]{22}", shown))
            assert len(keys) == 1, shown  # the server's own ref, not one of the gateway's
            (key,) = keys
            state = gateway.scopes.all()[0]
            kept = gateway.store.list(state.store_scope)
            assert all(m.bytes < size for m in kept), [(m.kind, m.bytes) for m in kept]
            got = await client.call_tool("call_tool", {"name": "sdk__digest", "arguments": {
                "data": {"$ref": {"type": "Blob", "key": key}}}})
            assert not got.is_error and probe_digest(size) in text(got), text(got)
            never = "art_" + "Q" * 22
            refused = await client.call_tool("call_tool", {"name": "sdk__digest", "arguments": {
                "data": {"$ref": {"type": "Blob", "key": never}}}})
            assert refused.is_error and f"{never!r} is not available" in text(refused)
