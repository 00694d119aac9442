"""What an upstream's list answers say about caching them: its `ttlMs` and `cacheScope`.

A 2026-07-28 server's `tools/list`, `resources/list`, `resources/templates/list` and
`prompts/list` carry both (the SDK fills `0`/`private` where the server chose nothing); a
handshake-era one's carry neither. Owns reading them off an answer's pages (`hint_of`), a list
that keeps its answer's hint (`Listed`), and the hint a list fetched a while ago still earns
(`Kept`). The law: an answer's hint is its pages' shortest `ttlMs` and `private` if any page says
so; a server that said nothing bounds nothing (None); a kept hint's freshness runs from when the
answer arrived, never from when it is read. What the gateway promises from these is `caching`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import mcp_types as types
from mcp.server.caching import CacheHint

T = TypeVar("T")


def hint_of(pages: Iterable[types.CacheableResult]) -> CacheHint | None:
    """The hint an answer's pages carry together, or None when none carried one."""
    found: CacheHint | None = None
    for page in pages:
        if "ttl_ms" not in page.model_fields_set and "cache_scope" not in page.model_fields_set:
            continue
        found = combined(found, CacheHint(ttl_ms=page.ttl_ms, scope=page.cache_scope))
    return found


def combined(a: CacheHint | None, b: CacheHint | None) -> CacheHint | None:
    """The hint that promises no more than either: the shorter ttl, private if either is."""
    if a is None or b is None:
        return a if b is None else b
    return CacheHint(ttl_ms=min(a.ttl_ms, b.ttl_ms),
                     scope="private" if "private" in (a.scope, b.scope) else "public")


class Listed(list[T], Generic[T]):
    """An upstream list's items, with the hint its answer carried (`hint`, None: none)."""

    hint: CacheHint | None = None


@dataclass(frozen=True)
class Kept:
    """An answer's hint, and when it arrived (`time.monotonic`)."""

    hint: CacheHint
    at: float = field(default_factory=time.monotonic)

    def now(self) -> CacheHint:
        """The hint as it stands now: its ttl less the time since the answer arrived."""
        spent = int((time.monotonic() - self.at) * 1000)
        return CacheHint(ttl_ms=max(0, self.hint.ttl_ms - spent), scope=self.hint.scope)
