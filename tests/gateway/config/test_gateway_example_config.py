"""The config the repository ships (`examples/gateway.json`, what `make demo` points at) runs as
written: its upstream starts, its export is kept by ref, the ref goes to the next tool, and every
relative path in it is taken from the config's folder, whatever the working directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from _gateway_rig import text
from mcp import Client

from _waits import scaled
from byref.gateway import Gateway, build_server, load_config

pytestmark = pytest.mark.anyio
EXAMPLES = Path(__file__).parents[3] / "examples"


async def test_the_shipped_example_config_runs_and_keeps_its_files_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("python3") is None:
        pytest.skip("the example's upstream runs `python3`, which is not on PATH here")
    here = tmp_path / "here"
    here.mkdir()
    for name in ("gateway.json", "export_server.py"):
        shutil.copy(EXAMPLES / name, here / name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative paths are the config's, not the working directory's
    config = load_config(Path("..") / "here" / "gateway.json")
    assert config.store == f"file://{here}/.byref"
    assert config.usage == here / "usage.jsonl"
    with anyio.fail_after(scaled(60)):
        async with Gateway(config) as gateway, Client(build_server(gateway)) as client:
            await gateway.toolbox(wait=scaled(30))
            export = await client.call_tool("call_tool", {"name": "exports__export_orders"})
            assert not export.is_error, text(export)
            placed = json.loads(text(export))  # kept by ref: its shape and a preview
            assert placed["placed"] is True and placed["bytes"] > 700_000, placed
            counted = await client.call_tool("call_tool", {
                "name": "exports__count_late", "arguments": {"export": placed["value"]}})
            assert not counted.is_error, text(counted)
            assert text(counted) == '{"orders": 10000, "late": 1429}'
    assert any((here / ".byref").rglob("*.bin"))
    assert list(elsewhere.iterdir()) == []
