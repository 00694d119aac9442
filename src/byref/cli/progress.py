"""Progress bars that appear on a terminal and stay silent when output is piped."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Advance(Protocol):
    """Moves a progress bar on by `amount`."""
    def __call__(self, amount: float) -> None:
        """Move the bar on by `amount` units."""


@contextmanager
def progress(label: str, total: float) -> Iterator[Advance]:
    """A progress bar on stderr labelled `label` (a no-op when stderr is not a terminal); yields
    its `Advance`."""
    if not sys.stderr.isatty():
        yield lambda amount: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda amount: bar.advance(task, amount)
