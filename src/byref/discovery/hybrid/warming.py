"""The hybrid ranker's background threads: the ones that read or encode document vectors while
searches answer lexically.

The law: at most one warming thread per index (a newer index replaces the older's entry); a stop
is asked of the work itself (`Warming.check`, called between encode batches, ends it) and every
thread is stopped at interpreter exit, since a thread inside the ONNX runtime at exit aborts the
process.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

STOP_WAIT_S = 30.0


class _Stopped(Exception):
    """The ranker was stopped while it encoded (the process is exiting)."""


class Warming:
    """One ranker's warming threads and its stop flag."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._current: tuple[Any, threading.Thread] | None = None
        """The latest index's (key, thread): a newer index replaces it."""

    def check(self) -> None:
        """Ends the work on this thread when a stop was asked (between two batches)."""
        if self._stopping.is_set():
            raise _Stopped

    def once(self, key: Any, work: Callable[[], None]) -> threading.Thread:
        """The thread running `work` for `key` (an index), started on the first call only."""
        with self._lock:
            if self._current is not None and self._current[0] is key:
                return self._current[1]
            thread = self.start(work)
            self._current = (key, thread)
        return thread

    def start(self, work: Callable[[], None]) -> threading.Thread:
        """A daemon thread running `work` (a stop ends it quietly)."""
        def run() -> None:
            with contextlib.suppress(_Stopped):
                work()

        thread = threading.Thread(target=run, name="byref-vectors", daemon=True)
        _LIVE.add(self)
        thread.start()
        return thread

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Asks the work to stop after its current batch and waits for the threads."""
        self._stopping.set()
        with self._lock:
            current = self._current
        if current is not None:
            current[1].join(timeout)


_LIVE: weakref.WeakSet[Warming] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for warming in list(_LIVE):
        warming.stop()
