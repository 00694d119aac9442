from __future__ import annotations

import os

import pytest

import _tiers
from byref.dispatch import Dispatcher
from byref.events import Emitter, MemorySink
from byref.store import MemoryStore, Scope
from byref.tools import BUILTIN_JSON_TOOLS, Tool
from byref.transcript import Transcript


class Rig:
    """A dispatcher over a memory store, with an event sink to read back."""

    def __init__(self, tools: list[Tool]) -> None:
        self.sink = MemorySink()
        self.emit = Emitter(self.sink)
        self.transcript = Transcript()
        self.store = MemoryStore(emit=self.emit)
        self.scope = Scope("test", conversation="rig")
        self.dispatcher = Dispatcher([*tools, *BUILTIN_JSON_TOOLS], transcript=self.transcript,
                                     store=self.store, scope=self.scope, emit=self.emit)


@pytest.fixture
def rig_factory() -> type[Rig]:
    return Rig


# -- tiers: markers for what a test needs, and the fast tier's guard (tests/_tiers.py) ---------
def pytest_configure(config: pytest.Config) -> None:
    _tiers.configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _tiers.classify(items, str(config.rootpath))


@pytest.fixture(autouse=True)
def _fast_tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("BYREF_FAST_TIER") and request.node.get_closest_marker("fast"):
        _tiers.guard(monkeypatch, request.node.nodeid)


@pytest.fixture
def anyio_backend() -> str:
    """Every async test runs on asyncio (the loop the gateway serves on)."""
    return "asyncio"
