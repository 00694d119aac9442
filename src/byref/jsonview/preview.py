"""Bounded previews and one-line shape hints."""

from __future__ import annotations

from typing import Any

from byref.jsonview.codec import dumps

DEFAULT_PREVIEW_CHARS = 6_000

# Tried in order until the rendering fits: (items per array, keys per object, string chars, depth)
_LADDER = (
    (20, 40, 240, 6), (10, 25, 160, 5), (5, 15, 100, 4), (3, 10, 60, 3), (2, 6, 40, 3),
    (1, 4, 24, 2), (1, 2, 16, 1),
)


def preview(value: Any, max_chars: int = DEFAULT_PREVIEW_CHARS) -> str:
    """Compact JSON of `value`, pruned until it fits `max_chars`; every cut is labelled."""
    return dumps(bounded(value, max_chars))


def bounded(value: Any, max_chars: int = DEFAULT_PREVIEW_CHARS) -> Any:
    """`value` pruned (step by step down a ladder) until its compact JSON fits `max_chars`."""
    if len(dumps(value)) <= max_chars:
        return value
    for items, keys, chars, depth in _LADDER:
        pruned = _prune(value, items, keys, chars, depth)
        if len(dumps(pruned)) <= max_chars:
            return pruned
    summary = f"[{shape_hint(value)}]"
    # Escapes can lengthen the encoding, so cut until the encoded text fits.
    while summary and len(dumps(summary)) > max_chars:
        summary = summary[: len(summary) - max(1, len(dumps(summary)) - max_chars)]
    return summary


def _prune(value: Any, items: int, keys: int, chars: int, depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= chars:
            return value
        return f"{value[:chars]}… [string, {len(value):,} chars]"
    if isinstance(value, list):
        if depth == 0:
            return f"[array, {len(value):,} items]"
        kept = [_prune(v, items, keys, chars, depth - 1) for v in value[:items]]
        if len(value) > items:
            kept.append(f"… {len(value) - items:,} more items")
        return kept
    if isinstance(value, dict):
        if depth == 0:
            return f"[object, {len(value):,} keys]"
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i == keys:
                out["…"] = f"{len(value) - keys:,} more keys"
                break
            out[str(k)] = _prune(v, items, keys, chars, depth - 1)
        return out
    return value


def shape_hint(value: Any, max_keys: int = 8) -> str:
    """One line: "JSON array, 4,812 items; keys: id, title, status, …"."""
    if isinstance(value, list):
        text = f"JSON array, {len(value):,} item{'s' if len(value) != 1 else ''}"
        keys = _item_keys(value, max_keys)
        return text + (f"; keys: {keys}" if keys else "")
    if isinstance(value, dict):
        names = list(value)
        shown = ", ".join(names[:max_keys]) + (", …" if len(names) > max_keys else "")
        text = f"JSON object, {len(names):,} key{'s' if len(names) != 1 else ''}: {shown}"
        arrays = [(k, v) for k, v in value.items() if isinstance(v, list)]
        if arrays:
            name, biggest = max(arrays, key=lambda kv: len(kv[1]))
            inner = _item_keys(biggest, max_keys)
            text += f"; {name!r}: array, {len(biggest):,} items" + (
                f" (keys: {inner})" if inner else ""
            )
        return text
    if isinstance(value, str):
        return f"JSON string, {len(value):,} chars"
    return f"JSON {type(value).__name__ if value is not None else 'null'}"


def _item_keys(items: list[Any], max_keys: int) -> str:
    seen: dict[str, None] = {}
    for item in items[:50]:
        if isinstance(item, dict):
            seen.update(dict.fromkeys(item))
    names = list(seen)
    return ", ".join(names[:max_keys]) + (", …" if len(names) > max_keys else "")
