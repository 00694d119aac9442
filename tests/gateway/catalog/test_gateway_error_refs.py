"""An error a tool answered with is a result the model sees, so it ends with a ref line like any
result: the line names the tool's own words, which a ref passes on byte for byte. A refusal of
byref's (the tool did not run) has nothing to pass on and no line.

Driven by the official `mcp` client against a gateway over the blocks fixture (stdio), whose
`refuse` answers an `isError` result spelled as a parser would not keep it.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from _gateway_rig import FIXTURES, World, ref_line_of, running
from mcp import Client

from _waits import scaled

sys.path.insert(0, str(FIXTURES))
from blocks_server import REFUSAL

pytestmark = pytest.mark.anyio


async def test_an_upstream_error_carries_a_ref_to_its_own_words(world: World) -> None:
    blocks = {"command": sys.executable, "args": [str(FIXTURES / "blocks_server.py")],
              "timeout": scaled(30)}
    out = world.root / "error.txt"
    with anyio.fail_after(scaled(60)):
        async with running(world, {"blocks": blocks}) as (_, server), Client(server) as client:
            async def call(name: str, **arguments: Any) -> Any:
                return await client.call_tool("call_tool", {"name": name,
                                                            "arguments": arguments})

            refused = await call("blocks__refuse")
            assert refused.is_error
            said, line = (b.text for b in refused.content)
            assert said == f"Server 'blocks' tool 'refuse' reported an error: {REFUSAL}"
            ref = ref_line_of(refused)
            assert ref is not None, line
            saved = await call("blocks__save", path=str(out), text=ref)
            assert not saved.is_error, saved.content
            assert out.read_bytes() == REFUSAL.encode()
            # byref's own refusal: the tool did not run, there is nothing to pass on.
            unknown = await call("blocks__no_such_tool")
            assert unknown.is_error
            assert len(unknown.content) == 1 and ref_line_of(unknown) is None
