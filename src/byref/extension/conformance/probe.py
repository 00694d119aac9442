"""The probe contract: the two tools a server under the refs battery offers, and their bytes.

Owns what the battery asks of a server beyond the extension itself: a tool that answers with
exactly `size` bytes of `probe_text` (`emit`), and one that answers with the sha-256 hex of the
text it was given (`digest`); `add_probe_tools` adds both to an `MCPServer`. The law:
`probe_text(n)` is the same n ASCII bytes everywhere, so the battery knows a placed result's
digest without reading it.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

PATTERN: Final = "byref refs probe: the bytes stay in the store. 0123456789\n"
"""The line `probe_text` repeats (ASCII: one character is one byte)."""


def probe_text(size: int) -> str:
    """Exactly `size` ASCII characters of PATTERN repeated."""
    whole, rest = divmod(max(0, size), len(PATTERN))
    return PATTERN * whole + PATTERN[:rest]


def probe_digest(size: int) -> str:
    """The sha-256 hex of `probe_text(size)`."""
    return hashlib.sha256(probe_text(size).encode()).hexdigest()


def add_probe_tools(server: Any) -> Any:
    """Add `emit` and `digest` to an SDK `MCPServer` (anything with its `add_tool`); returns
    the server."""

    def emit(size: int) -> str:
        return probe_text(size)

    def digest(data: str) -> str:
        return hashlib.sha256(data.encode()).hexdigest()

    server.add_tool(emit, description="Answer with exactly `size` bytes of a known text.")
    server.add_tool(digest, description="The sha-256 hex digest of `data` (UTF-8).")
    return server
