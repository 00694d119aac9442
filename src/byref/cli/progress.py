"""Progress bars that appear on a terminal and stay silent when output is piped."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Advance(Protocol):
    def __call__(self, amount: float) -> None: ...


@contextmanager
def progress(label: str, total: float) -> Iterator[Advance]:
    if not sys.stderr.isatty():
        yield lambda amount: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda amount: bar.advance(task, amount)
