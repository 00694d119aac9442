"""SEP-2631 files behind the gateway: a Blob ref the model routes into an `x-mcp-file` input
reaches the upstream as a `data:` URI of the exact stored bytes with their media type; an input
that takes uploads only, or fewer bytes, or other media types, refuses it in words, the upstream
not called; and an upstream's `FileValue` output becomes a Blob ref, its bytes never shown."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any

import anyio
import pytest
from _gateway_rig import fixtures_gateway, text
from mcp import Client

from _waits import scaled
from byref.extension.conformance.probe import probe_digest

pytestmark = pytest.mark.anyio


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    return await client.call_tool("call_tool", {"name": name, "arguments": arguments})


async def test_a_blob_ref_reaches_a_file_input_as_a_data_uri_of_its_bytes() -> None:
    size = 100_000
    with anyio.fail_after(scaled(60)):
        async with fixtures_gateway(None, {"files": "files_server.py"}) as (_g, server), \
                Client(server) as client:
            placed = json.loads(text(await _call(client, "files__emit", {"size": size})))
            ref = placed["value"]
            got = await _call(client, "files__checksum", {"document": ref})
            assert not got.is_error, text(got)
            assert text(got) == f"text/plain {size} {probe_digest(size)}"
            for tool, why in (("files__upload_only", "takes ['upload'] transfers only"),
                              ("files__tiny", f"is {size:,} bytes; this file input takes at "
                                              "most 1,000")):
                refused = await _call(client, tool, {"document": ref})
                assert refused.is_error and why in text(refused), text(refused)


async def test_an_upstreams_file_output_is_a_blob_ref() -> None:
    with anyio.fail_after(scaled(60)):
        async with fixtures_gateway(None, {"files": "files_server.py"}) as (_g, server), \
                Client(server) as client:
            made = await _call(client, "files__report", {})
            shown = text(made)
            assert not made.is_error and "report ready" in shown, shown
            assert "2000,2000000" not in shown and len(shown) < 3_000, shown
            assert made.structured_content is None  # the data: URI is not sent again
            (key,) = set(re.findall(r"art_[0-9A-Za-z]{22}", shown))
            ref = {"$ref": {"type": "Blob", "key": key}}
            got = await _call(client, "files__checksum", {"document": ref})
    report = sys.modules["gateway_fixture_files_server"].REPORT  # loaded by `fixtures_gateway`
    assert text(got) == f"text/csv {len(report)} {hashlib.sha256(report).hexdigest()}"
