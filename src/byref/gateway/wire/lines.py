"""Lines of text from a read pipe, assembled on the loop as the SDK's stdio layers split and decode
them (`stdio_transport` reads both of the gateway's stdio edges through them)."""

from __future__ import annotations

import codecs
import io
from collections import deque
from collections.abc import Callable
from typing import Protocol

READ_CHUNK = 1 << 16
"""Bytes asked of the pipe at a time (a longer line is assembled from several reads)."""


class ChunkSource(Protocol):
    """Where a pipe's bytes come from: `read(n)` returns up to n bytes, b"" at end of file."""

    async def read(self, n: int, /) -> bytes:
        """Up to `n` bytes; b"" at end of file."""
        ...


class PipeLines:
    """Lines of text from a read pipe, assembled on the loop.

    By default (the server edge) they are what the SDK's text layer yields: UTF-8 with bad bytes
    replaced, universal newlines, each line with its newline, the last one at EOF even without.
    With `universal=False` (the client edge) they are what the SDK's `stdio_client` parses: split
    on "\\n" only, without it, in `encoding`/`errors`, and a last line without a newline dropped.
    A line's chunks wait in a list and only each new chunk is searched for the line's end, so a
    line of many chunks costs one join (not a re-join and re-split a chunk)."""

    def __init__(self, reader: ChunkSource, *, encoding: str = "utf-8", errors: str = "replace",
                 universal: bool = True) -> None:
        self._reader = reader
        decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
        self._decode: Callable[[bytes, bool], str] = (
            io.IncrementalNewlineDecoder(decoder, translate=True).decode if universal
            else decoder.decode)
        self._universal = universal
        self._lines: deque[str] = deque()
        self._partial: list[str] = []
        self._eof = False

    async def next_line(self) -> str | None:
        """The next line (as the SDK hands it to its parser); None at end of file."""
        while not self._lines:
            if self._eof:
                return None
            chunk = await self._reader.read(READ_CHUNK)
            text = self._decode(chunk, not chunk)
            if not chunk:
                self._eof = True
            if "\n" in text:
                complete = text.split("\n")
                if self._partial:
                    complete[0] = "".join(self._partial) + complete[0]
                rest = complete.pop()
                self._partial = [rest] if rest else []
                if self._universal:
                    self._lines.extend(line + "\n" for line in complete)
                else:
                    self._lines.extend(complete)
            elif text:
                self._partial.append(text)
            if self._eof and self._partial:
                if self._universal:  # the SDK's text layer yields the last line; its client not
                    self._lines.append("".join(self._partial))
                self._partial = []
        return self._lines.popleft()

    async def readline(self) -> str:
        """The next line with its newline (the last one may lack it); "" at end of file."""
        line = await self.next_line()
        return "" if line is None else line

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line

    async def aclose(self) -> None:
        """Nothing to release here: the pipe's owner closes it."""
        return None
