"""SEP-2631 (draft) file transfer mapped onto the refs host methods, against the gateway and the
SDK extension over HTTP: an announced ref carries its `FileValue`; `files/authorizeDownload` of
its file URI gives a `GET` descriptor for the exact bytes; `files/authorizeUpload` gives a `PUT`
descriptor whose bytes, exactly the declared size and digest, become a Blob ref a tool receives
byte-exact; another owner's file URI and upload URL are absent; wrong bytes are not kept."""

from __future__ import annotations

import hashlib
import json

import anyio
import pytest
from _refs_rig import ALICE, BOB, ask, client, get, refused_as, serving, text
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.extension.conformance.probe import probe_digest
from byref.extension.protocol import announced, b64url
from byref.store.adapters.memory import MemoryStore

pytestmark = pytest.mark.anyio


async def _put(url: str, token: str, body: bytes) -> tuple[int, bytes]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        answer = await http.put(url, content=body)
        return answer.status_code, answer.content


@pytest.mark.parametrize("impl", ["gateway", "sdk"])
async def test_sep_2631_download_and_upload_map_onto_refs(impl: str) -> None:
    size = 300_000
    with anyio.fail_after(scaled(180)):
        async with serving(impl, MemoryStore()) as (url, emit, digest), \
                client(url, ALICE) as alice, client(url, BOB) as bob:
            (entry,) = announced((await alice.call_tool(emit, {"size": size})).meta)
            file = entry["file"]
            assert file["uri"] == "mcp-file://byref/" + entry["ref"]["$ref"]["key"]
            assert (file["size"], file["digest"]) == (size, {
                "algorithm": "sha-256", "value": b64url(probe_digest(size))})

            got = await ask(alice, "files/authorizeDownload", {"uri": file["uri"]})
            assert got["file"] == file and got["download"]["method"] == "GET"
            status, body = await get(got["download"]["url"], ALICE)
            assert status == 200 and hashlib.sha256(body).hexdigest() == probe_digest(size)
            foreign = await refused_as(bob, "files/authorizeDownload", {"uri": file["uri"]})
            assert foreign.startswith("-32002 ") and "is not available" in foreign

            data = ("a file the host picked for a remote tool\n" * 20_000).encode()
            sha = hashlib.sha256(data).hexdigest()
            grant = await ask(alice, "files/authorizeUpload", {
                "name": "picked.txt", "mimeType": "text/plain", "size": len(data),
                "digest": {"algorithm": "sha-256", "value": b64url(sha)}})
            put = grant["upload"]
            assert put["method"] == "PUT" and grant["file"]["uri"].startswith("mcp-file://byref/")
            assert (await _put(put["url"], BOB, data))[0] == 404  # another owner's URL
            assert (await _put(put["url"], ALICE, data[:-1]))[0] == 400  # not the size declared
            status, kept = await _put(put["url"], ALICE, data)
            assert status == 201, kept
            stored = json.loads(kept)
            assert stored["sha256"] == sha and stored["file"]["name"] == "picked.txt"
            assert (await _put(put["url"], ALICE, data))[0] == 404  # a grant is spent once
            delivered = await alice.call_tool(digest, {"data": stored["ref"]})
            assert not delivered.is_error and sha in text(delivered), text(delivered)
