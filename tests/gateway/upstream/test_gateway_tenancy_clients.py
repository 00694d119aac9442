"""Upstream tenancy with the clients people run: two tenants on one HTTP gateway, each with its
own roots, in front of the everything server and the filesystem server; and an upstream's log
lines reaching a 2026-07-28 FastMCP client over HTTP during its call.

The official `mcp` client (Alice) and the FastMCP client (Mallory) connect first in either order;
each tenant sees only its own roots, and what the filesystem server allows a tenant is the same
whichever connected first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, ref_line_of
from test_gateway_tenancy import ALICE, MALLORY, TOKENS, client, serving

from _waits import scaled

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"
FILESYSTEM = ROOT / "node_modules" / ".bin" / "mcp-server-filesystem"


def _fastmcp(url: str, token: str, **options: Any) -> Any:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                                  "(pip install -e '.[dev]')")
    from fastmcp.client.transports import StreamableHttpTransport

    return fastmcp.Client(StreamableHttpTransport(url, auth=token), **options)


def _text(result: Any) -> str:
    """The result's text blocks, without the ref line an inline result ends with."""
    blocks = list(result.content)
    if blocks and ref_line_of(result) is not None:
        blocks = blocks[:-1]
    return "\n".join(getattr(b, "text", "") for b in blocks)


async def _alice(url: str, home: Path) -> dict[str, str]:
    async def roots(_: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=home.as_uri(), name="alice")])  # type: ignore[arg-type]

    out: dict[str, str] = {}
    async with client(url, ALICE, mode="legacy", list_roots_callback=roots) as c:
        for tool in ("everything__get-roots-list", "filesystem__list_allowed_directories"):
            got = await c.call_tool("call_tool", {"name": tool, "arguments": {}})
            out[tool] = _text(got)
    return out


async def _mallory(url: str, home: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    async with _fastmcp(url, MALLORY, roots=[home.as_uri()]) as c:
        for tool in ("everything__get-roots-list", "filesystem__list_allowed_directories"):
            got = await c.call_tool("call_tool", {"name": tool, "arguments": {}},
                                    raise_on_error=False)
            out[tool] = _text(got)
    return out


@pytest.mark.parametrize("first", ["alice", "mallory"])
async def test_each_tenant_sees_only_its_own_roots_whoever_connects_first(
        world: World, tmp_path: Path, first: str) -> None:
    # One gateway a test: a FastMCP 4 client does not connect to a second gateway started in the
    # same event loop (it waits for its session forever; on main as well).
    if not (EVERYTHING.exists() and FILESYSTEM.exists()):
        pytest.skip("the everything and filesystem servers come from npm: run `make upstreams`")
    alice_home, mallory_home = tmp_path / "alice-secret-project", tmp_path / "mallory-project"
    alice_home.mkdir()
    mallory_home.mkdir()
    servers = {"everything": {"command": str(EVERYTHING), "args": ["stdio"], "timeout": scaled(30)},
               "filesystem": {"command": str(FILESYSTEM), "timeout": scaled(30),
                              "args": [str(alice_home), str(mallory_home)]}}
    seen: dict[str, dict[str, str]] = {}
    with anyio.fail_after(scaled(120)):
        async with serving(world, servers) as (_gateway, url):
            for who in (first, *({"alice", "mallory"} - {first})):
                seen[who] = await (_alice(url, alice_home) if who == "alice"
                                   else _mallory(url, mallory_home))
    both = f"Allowed directories:\n{alice_home}\n{mallory_home}"
    # The same assertions whoever came first: each tenant was told the same either way.
    for run in (seen,):
        alice, mallory = run["alice"], run["mallory"]
        assert alice_home.as_uri() in alice["everything__get-roots-list"], alice
        assert mallory_home.as_uri() not in alice["everything__get-roots-list"], alice
        assert str(alice_home) not in mallory["everything__get-roots-list"], mallory
        # Mallory's client cannot answer roots at start-up: her filesystem server keeps the
        # directories it was started with, whoever came first; Alice's answered roots narrow
        # only her own (applied by the server as it gets to it: narrowed, or not yet).
        assert mallory["filesystem__list_allowed_directories"] == both, mallory
        assert alice["filesystem__list_allowed_directories"] in (
            both, f"Allowed directories:\n{alice_home}"), alice


async def test_logs_reach_a_2026_fastmcp_client_over_http_during_its_call(world: World) -> None:
    logs: list[Any] = []

    async def on_log(message: Any) -> None:
        logs.append(message)

    servers = {"conformance": world.fixture("conformance_server.py", 20)}
    if EVERYTHING.exists():
        servers["everything"] = {"command": str(EVERYTHING), "args": ["stdio"],
                                 "timeout": scaled(30)}
    with anyio.fail_after(scaled(120)):
        async with serving(world, servers) as (_gateway, url), _fastmcp(
                url, ALICE, log_handler=on_log) as c:
            assert c.protocol_version == "2026-07-28"
            await c.call_tool("call_tool", {"name": "conformance__test_tool_with_logging",
                                            "arguments": {}})
            assert [(m.logger, m.data) for m in logs] == [
                ("conformance/conformance", "Tool execution started"),
                ("conformance/conformance", "Tool processing data"),
                ("conformance/conformance", "Tool execution completed")]
            if EVERYTHING.exists():
                logs.clear()
                await c.call_tool("call_tool", {"name": "everything__toggle-simulated-logging",
                                                "arguments": {}})
                assert [m.logger for m in logs][:1] == ["everything"], logs
    assert TOKENS  # two principals: the servers run one process each per principal
