"""A result's refs announced in `_meta` for a client that declared `dev.byref/refs`.

Owns `announce`: the `_meta[IDENTIFIER]` of one recorded result part — every value it stored
(a placed result or block, a binary marker), each with its block, size, media type, sha-256,
shape and expiry as the caller's scope reads its record, and the result's own Message ref when
it was inserted whole. The law: the announcement names only what the text already shows (the
same keys, in the same blocks), reads only records of the caller's scope, and is built only when
the client declared the extension (`byref.extension.protocol.declared`); else nothing is added.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from byref.dispatch.outbound.reflines import named
from byref.extension.protocol import announcement, blob_key, entry
from byref.refs import MessageRef, envelope
from byref.store import ArtifactStore, Scope
from byref.transcript import Part

_DEPTH = 32
"""How deep a recorded value is searched for markers (deeper ones are not announced)."""


def stored_values(value: Any, *, blocks: bool) -> list[tuple[int, str, str | None]]:
    """(block, artifact key, shape) of each stored value a recorded result shows, in order."""
    items = value if blocks and isinstance(value, list) else [value]
    found: list[tuple[int, str, str | None]] = []
    for block, item in enumerate(items):
        _walk(item, block, found, 0)
    return found


def _walk(value: Any, block: int, found: list[tuple[int, str, str | None]], depth: int) -> None:
    if depth > _DEPTH:
        return
    if isinstance(value, dict):
        if value.get("placed") is True or value.get("opaque") is True:
            key = blob_key(value.get("value"))
            if key is not None:
                shape = value.get("shape")
                found.append((block, key, shape if isinstance(shape, str) else None))
                return
        for item in value.values():
            _walk(item, block, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk(item, block, found, depth + 1)


async def announce(store: ArtifactStore, scope: Scope, part: Part, latest: int
                   ) -> dict[str, Any]:
    """`_meta[IDENTIFIER]` of a result part (its stored values' records read in `scope`);
    `latest`: the record's last seq, which the ref line's handle is read back by (the
    announcement carries the full Message ref)."""
    blocks = isinstance(part.value, list) and not part.is_error
    values = [] if part.is_error else stored_values(part.value, blocks=blocks)

    def heads() -> list[dict[str, Any]]:
        out = []
        for block, key, shape in values:
            meta = store.head(scope, key)
            if meta is not None:
                out.append(entry(meta, block=block, shape=shape))
        return out

    entries = await anyio.to_thread.run_sync(heads) if values else []
    at = named(part.rendered, latest)
    own = None if at is None else envelope(MessageRef(seq=at[0], part=at[1]))
    return announcement(entries, own)
