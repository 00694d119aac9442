"""A proxied call's arguments are validated once, after its refs are delivered, against the
upstream's own schema (the proxied tool checks its input: dispatch skips its declared-schema
check, and `Tool.convert` never runs a third) — and that one check still refuses whatever the
declared schema would, in the upstream schema's words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled
from byref.gateway.catalog.proxy import ProxiedTool

pytestmark = pytest.mark.anyio
ECHO = "flaky__echo"


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The schema of every jsonschema validation run (Draft 2020-12, as byref validates)."""
    seen: list[Any] = []
    real = jsonschema.Draft202012Validator.iter_errors

    def counting(self: Any, instance: Any, *args: Any, **kw: Any) -> Any:
        seen.append(self.schema)
        return real(self, instance, *args, **kw)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", counting)
    yield seen


async def test_a_proxied_call_is_validated_against_each_schema_once(
        world: World, validated: list[Any]) -> None:
    servers = {"flaky": world.fixture("misbehaving.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            assert not (await client.call_tool(ECHO, {"text": "warm"})).is_error
            tool = (await gateway.toolbox()).catalog.tool(ECHO)
            assert isinstance(tool, ProxiedTool)
            validated.clear()
            for n in range(3):
                result = await client.call_tool(ECHO, {"text": f"hi {n}"})
                assert not result.is_error, text(result)
    upstream = [s for s in validated if s is tool.upstream_schema]
    assert len(upstream) == 3  # after delivery, against the upstream's schema
    assert validated == upstream  # not dispatch's declared schema, nor convert's


async def test_each_check_still_refuses(world: World) -> None:
    servers = {"flaky": world.fixture("misbehaving.py"), **world.need("git")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            wrong = await client.call_tool(ECHO, {"text": 5})  # not a ref: the same subschema
            assert wrong.is_error
            assert text(wrong) == (
                f"Tool {ECHO!r} was not sent to server 'flaky': its arguments, with references "
                "resolved, do not fit its schema at 'text': 5 is not of type 'string'.")
            words = await client.call_tool(ECHO, {"text": "not a number"})
            assert not words.is_error, text(words)
            seq = gateway.scopes.state(gateway.scopes.stdio_scope).transcript.last_seq
            # A ref passes the declared schema; what it delivers, text to an integer parameter,
            # only the upstream's own schema can refuse.
            refused = await client.call_tool("git__git_log", {
                "repo_path": str(world.repo),
                "max_count": {"$ref": {"type": "Message", "seq": seq, "part": 0}}})
            assert refused.is_error
            assert text(refused).startswith(
                "Tool 'git__git_log' was not sent to server 'git': its arguments, with "
                "references resolved, do not fit its schema at 'max_count': "), text(refused)
