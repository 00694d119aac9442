"""The one switch that turns every SDK bypass off (`wire.bypass`): with it on, the gateway builds
no lane on either edge and every request takes the SDK's own path."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from _gateway_rig import FIXTURES

from byref.gateway import Gateway, http_app
from byref.gateway.config.file import parse_config
from byref.gateway.edge.lanes.fastpath import PlainCalls
from byref.gateway.edge.server import build_server
from byref.gateway.wire import bypass, sdk_server


def _config(tmp_path: Path) -> Gateway:
    config = parse_config({
        "mcpServers": {"echo": {"command": "python3", "args": [str(FIXTURES / "meta_echo.py")]}},
        "byref": {"tokens": {"t" * 32: {"tenant": "acme", "principal": "alice"}}},
    }, source=str(tmp_path / "c.json"))
    return Gateway(config)


def test_every_lane_is_listed_once() -> None:
    assert set(bypass.LANES) == {"raw_calls", "fastpath", "stdio", "http", "front"}


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_the_switch_turns_the_lanes_off(monkeypatch: pytest.MonkeyPatch, value: str,
                                        tmp_path: Path) -> None:
    monkeypatch.setenv(bypass.SDK_PATHS_ONLY_ENV, value)
    assert not bypass.lanes_on()
    gateway = _config(tmp_path)
    assert not any(isinstance(m, PlainCalls) for m in build_server(gateway).middleware)
    app = http_app(gateway)
    assert type(app.middleware_stack).__name__ != "HttpLane"


def test_without_the_switch_the_lanes_are_built(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.delenv(bypass.SDK_PATHS_ONLY_ENV, raising=False)
    assert bypass.lanes_on() and not bypass.lanes_on(False)
    gateway = _config(tmp_path)
    assert any(isinstance(m, PlainCalls) for m in build_server(gateway).middleware)
    assert not any(isinstance(m, PlainCalls)
                   for m in build_server(gateway, lanes=False).middleware)


def test_an_sdk_without_the_lane_internals_is_named_once_and_served_by_the_sdk(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(bypass.SDK_PATHS_ONLY_ENV, raising=False)
    monkeypatch.setattr(sdk_server, "_HTTP_GAP", "mcp.server._streamable_http_modern (moved)")
    monkeypatch.setattr(bypass, "_reported", set())
    gateway = _config(tmp_path)
    with caplog.at_level(logging.WARNING, logger="byref.gateway.lanes"):
        http_app(gateway)
        http_app(gateway)
    lines = [r.getMessage() for r in caplog.records if r.name == "byref.gateway.lanes"]
    assert lines == ["byref gateway: the http lane is off: this mcp SDK release lacks "
                     "mcp.server._streamable_http_modern (moved); those requests are served "
                     "through the SDK"]
