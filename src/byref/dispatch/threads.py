"""Where a call's blocking work runs: the `Threads` port a dispatcher's owner may set.

Owns `Threads`: asked, on the event loop and before any worker thread is taken, for the lane a
call's blocking stages run in — a limiter of its own, or None for anyio's process-wide one. The
law: what `enter` refuses (a `Refusal`) never occupies a thread; what it admits holds its lane
until its blocking work ends. Without one, every call shares anyio's default limiter (a library
user with one caller needs nothing more); the gateway's keeps one principal's work from
delaying another's (`gateway/access/threads`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from byref.dispatch.calls import Call
from byref.tools.tool import Tool


class Threads(Protocol):
    """Lanes for calls' blocking work."""

    def enter(self, call: Call, tool: Tool | None) -> AbstractAsyncContextManager[Any]:
        """Held while `call`'s blocking work runs; yields the anyio `CapacityLimiter` its
        thread takes a token of (None: the default one). Raises `Refusal` to refuse the call
        before it occupies anything."""
        ...
