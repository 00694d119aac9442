"""The gateway's own lists, paged: tools, resources, templates and prompts, `PAGE` at a time.

Owns the cursor. The law: a cursor is opaque to the client (base64 of the next offset), one the
gateway did not hand out is refused saying what to pass instead, and the last page has none.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from byref.refs import quote

T = TypeVar("T")
PAGE = 100
"""Items in one page of the gateway's own lists."""


def page(items: Sequence[T], cursor: str | None) -> tuple[list[T], str | None]:
    """One page of a list and the cursor of the next (None on the last page)."""
    start = 0
    if cursor:
        try:
            start = int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["offset"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {quote(cursor)}: pass back the "
                           "nextCursor of the previous page.") from None
        if start < 0 or start > len(items):
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {quote(cursor)}: the list has "
                           f"{len(items)} items now; start again without a cursor.")
    end = start + PAGE
    more = end < len(items)
    next_cursor = base64.urlsafe_b64encode(json.dumps({"offset": end}).encode()).decode() \
        if more else None
    return list(items[start:end]), next_cursor
