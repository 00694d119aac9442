"""`ChatWire`: a Chat Completions endpoint on loopback whose answers a function gives.

The server is byref's public `ChatStandIn` (real HTTP, read by a framework's real OpenAI client);
where the stand-in plays a byref script, `ChatWire` hands each request body as the client sent
it to `play`, which answers a completion (JSON), so a test can read the wire's own shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from byref.testing import ChatStandIn


class ChatWire(ChatStandIn):
    """Use as `with ChatWire(play) as wire:`; `wire.bodies` keeps every request body."""

    def __init__(self, play: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        super().__init__([])
        self.play = play

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.bodies.append(body)
            return self.play(body)

    def sent(self) -> str:
        """Every body that crossed the wire, one JSON line each."""
        return "\n".join(json.dumps(b) for b in self.bodies)
