from __future__ import annotations

import os
import re
from typing import Any

import pytest
from hypothesis import settings

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
# Properties without their own count draw fewer examples in the fast tier (`_tiers.examples`).
settings.register_profile("fast", max_examples=_tiers.examples(100))
if _tiers.FAST:
    settings.load_profile("fast")


def pytest_configure(config: pytest.Config) -> None:
    _tiers.configure(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that failed on a missing optional module says which extra brings it."""
    outcome = yield
    hint = _tiers.missing_extra(call.excinfo.value) if call.excinfo else None
    if hint:
        report = outcome.get_result()
        report.longrepr = f"{item.nodeid}: {hint}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A module that cannot be imported for a missing optional module says which extra."""
    outcome = yield
    report = outcome.get_result()
    found = re.search(r"No module named '([\w.]+)'", str(report.longrepr or ""))
    hint = _tiers.missing_extra(ModuleNotFoundError(name=found[1])) if found else None
    if report.failed and hint:
        report.longrepr = f"{collector.nodeid}: {hint}"


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
