"""`Blocks`: a result made of several content blocks, each keeping its own place.

A tool (an MCP server's, through the gateway or `McpSource`) may answer with several blocks —
text, an image, more text. Returned as `Blocks`, they are recorded as a list (so a Message ref's
`field` "1" names the second block), shown one after another (each block's own rendering, never
one JSON array of them), and placed block by block: a block too large to insert is stored and
replaced, in its place, by its preview and ref, while the blocks around it stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Blocks:
    """Several blocks of one result, in order (strings, `Payload`s, JSON values)."""

    items: tuple[Any, ...]
