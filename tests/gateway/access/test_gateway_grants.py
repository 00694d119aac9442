"""Grants hold for resources and prompts: over HTTP, a token whose grant names only one of two
servers sees none of the other's resources, templates or prompts listed, and reading or getting
one is refused exactly as a name no server offers; a server's own URI or prompt name resolves
among the servers it sees. The other token sees both."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_gateway_auth import client, serving

from _waits import scaled

pytestmark = pytest.mark.anyio

FULL, OPEN = "grants-full-token-0123456789abcdef", "grants-open-token-0123456789abcdef"
TOKENS = {FULL: {"tenant": "acme", "principal": "full"},
          OPEN: {"tenant": "acme", "principal": "open", "servers": ["open"]}}


def _servers() -> dict[str, Any]:
    entry = {"command": sys.executable, "args": [str(FIXTURES / "passthrough_server.py")],
             "timeout": scaled(20)}
    return {"open": entry, "secret": dict(entry)}


async def _uris(c: Client) -> set[str]:
    out: set[str] = set()
    cursor: str | None = None
    for _ in range(50):
        got = await c.list_resources(cursor=cursor)
        out |= {str(r.uri) for r in got.resources}
        if not (cursor := got.next_cursor):
            break
    return out


async def _prompts(c: Client) -> set[str]:
    out: set[str] = set()
    cursor: str | None = None
    for _ in range(50):
        got = await c.list_prompts(cursor=cursor)
        out |= {p.name for p in got.prompts}
        if not (cursor := got.next_cursor):
            break
    return out


async def _refused(call: Any) -> str:
    with pytest.raises(MCPError) as err:
        await call
    return err.value.error.message


async def test_a_grant_hides_another_servers_resources_and_prompts(world: World) -> None:
    with anyio.fail_after(scaled(90)):
        async with serving(world, _servers(), tokens=TOKENS) as (gateway, url), client(
                url, OPEN) as limited, client(url, FULL) as full:
            # every server up: a list answers without one starting
            await gateway.toolbox(wait=scaled(30))
            # Each principal has processes of its own (`share`'s default on a shared gateway): a
            # read waits for its start, as a list (answered within 1 s) does not.
            await limited.read_resource("byref://open/item://1")
            await full.read_resource("byref://secret/item://1")
            seen = await _uris(limited)
            assert "byref://open/item://1" in seen
            assert not any(u.startswith("byref://secret/") for u in seen), sorted(seen)[:5]
            assert "byref://secret/item://1" in await _uris(full)
            templates = (await limited.list_resource_templates()).resource_templates
            assert not any(t.uri_template.startswith("byref://secret/") for t in templates)

            assert await _refused(limited.read_resource("byref://secret/item://1")) == (
                "Resource 'byref://secret/item://1' is not offered by any server behind this "
                "gateway; resources/list names each as byref://<server>/<uri>.")
            read = await limited.read_resource("byref://open/item://1")
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text == "content of item://1"
            # The server's own URI: both servers list it, the grant sees one.
            own = await limited.read_resource("item://1")
            assert str(own.contents[0].uri) == "item://1"
            assert "several servers" in await _refused(full.read_resource("item://1"))

            names = await _prompts(limited)
            assert "open__p1" in names and not any(n.startswith("secret__") for n in names)
            assert "secret__p1" in await _prompts(full)
            for name in ("secret__p1", "p1"):  # by the gateway's name, and by the server's own
                message = await _refused(limited.get_prompt(name))
                if name == "secret__p1":
                    assert message == (
                        "Prompt 'secret__p1' is not offered by any server behind this gateway; "
                        "prompts/list names each as <server>__<prompt>.")
                else:  # resolves to the one server it sees, which then asks (sampling)
                    assert "secret" not in message, message
