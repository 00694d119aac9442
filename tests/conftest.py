from __future__ import annotations

import pytest

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
