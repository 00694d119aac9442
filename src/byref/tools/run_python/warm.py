"""Sandboxes started ahead of their runs (`WarmPool`), and a run's sandbox-to-be (`Prepared`).

The law: a warm sandbox is a whole `Launch` — its own namespaces, tmpfs, rlimits, syscall
filter, pipes and tool channel — started with no program and no one's data, and given to
exactly one run; it is never reused: a replacement is started in the background once that run
is over (not during it, where its start would take the run's CPU). The pool keeps at most
`size` ready or starting for each kind of run asked for (limits, bootstrap, with or without a
channel), and never more sandboxes alive — ready, starting and running, cold runs included —
than `cap`. A run that finds none ready takes one still starting (sooner than a cold start),
else starts cold. A warm sandbox found dead or stopped (the kernel asked through a pidfd, the
child never woken) is discarded and replaced, never handed out; one idle past `idle` seconds is
stopped (None: kept until the pool closes). Warm starts that keep failing stop the warming;
runs then start cold, which says why.

Every warm sandbox is started by the pool's one thread: a sandbox's parent-death signal follows
the thread that started it, so that thread lives as long as the pool.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from byref.errors import MisuseError
from byref.tools.run_python.launch import Launch
from byref.tools.run_python.sandbox import IsolationUnavailable
from byref.tools.run_python.stage import CodeRunner, Limits, RunOutcome, StagingArea

log = logging.getLogger("byref.tools")

Key = tuple[Limits, str, bool]
"""What a warm sandbox was started for: the run's limits, its bootstrap, a tool channel or not."""
CLOSE_SECONDS = 15.0
"""How long `close` waits for each used sandbox still being stopped (and one starting)."""
WATCH_SECONDS = 0.5
"""How often an idle warm sandbox is checked for death and idleness."""
_FAILURES = 3
"""Warm starts failed in a row after which the pool stops warming."""


@dataclass(eq=False)
class Warm:
    """One warm sandbox: its staging area, its launch, the host's end of its tool channel."""

    key: Key
    stage: StagingArea | None = None
    launch: Launch | None = None
    channel: socket.socket | None = None
    ok: bool = False
    claimed: bool = False
    gone: bool = False
    up: threading.Event = field(default_factory=threading.Event)
    """Set once its start has succeeded or failed (`ok` says which)."""


Start = Callable[[Warm], None]
"""Fills a `Warm`'s stage, launch and channel, and starts its launch (warm)."""


class WarmPool:
    """Warm sandboxes by `Key`, at most `size` a key and `cap` alive in all (see the module)."""

    def __init__(self, start: Start, *, size: int, cap: int | None = None,
                 idle: float | None = 300.0, ready_timeout: float = 60.0) -> None:
        self.size = size
        self.cap = cap
        self.idle = idle
        self.ready_timeout = ready_timeout
        self.live = 0
        """Sandboxes alive that this pool counts: ready, starting, and running (cold too)."""
        self.peak = 0
        """The most `live` has been."""
        self.started = 0
        """Warm sandboxes started (replacements included)."""
        self.discarded = 0
        """Warm sandboxes stopped unused: found dead, idle too long, failed, or closed."""
        self.taken = 0
        """Warm sandboxes handed to a run."""
        self._start = start
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._entries: list[Warm] = []
        self._wanted: set[Key] = set()
        self._failures = 0
        self._closed = False
        self._queue: queue.SimpleQueue[Warm | None] = queue.SimpleQueue()
        self._starter: threading.Thread | None = None
        self._ending: list[threading.Thread] = []

    # -- taking --------------------------------------------------------------------------------
    def want(self, key: Key) -> None:
        """Keep `size` sandboxes warm for runs of `key` from now on."""
        with self._lock:
            self._wanted.add(key)
        self._refill(key)

    def take(self, key: Key) -> Warm | None:
        """A warm sandbox for `key`, alive and claimed for one run (a starting one waited for),
        or None: start cold. Its replacement starts now."""
        with self._lock:
            self._wanted.add(key)
            mine = [e for e in self._entries if e.key == key]
            ready = [e for e in mine if e.up.is_set() and e.ok]
            starting = [e for e in mine if not e.up.is_set()]
            found = ready or starting
            pick = found[0] if found else None
            if pick is not None:
                pick.claimed = True
                self._entries.remove(pick)
        if pick is None:  # this run starts cold; the next finds one warm
            self._refill(key)
            return None
        if not pick.up.wait(self.ready_timeout) or not pick.ok or pick.launch is None \
                or not pick.launch.waiting():
            self._discard(pick)  # never handed out dead (nor stopped)
            self._refill(key)
            return None
        with self._changed:
            self.taken += 1
            self._changed.notify_all()
        return pick

    def release(self, entry: Warm) -> None:
        """`entry`'s run is over: its sandbox is stopped and its files removed in the
        background (the namespace's teardown is no one's wait), then its place frees up."""
        def end() -> None:
            try:
                self._discard(entry, used=True)
            except OSError as exc:  # its files could not all be removed: said, not raised
                log.warning("byref: a used sandbox's files were left (%s)", exc)
            self._refill(entry.key)
        ending = threading.Thread(target=end, name="byref-warm-end", daemon=True)
        with self._lock:
            self._ending = [t for t in self._ending if t.is_alive()] + [ending]
        ending.start()

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        """Held while a cold run's sandbox is alive: it counts against `cap`."""
        with self._lock:
            self.live += 1
            self.peak = max(self.peak, self.live)
        try:
            yield
        finally:
            with self._lock:
                self.live -= 1

    def ready(self, key: Key | None = None) -> int:
        """Warm sandboxes ready now for `key` (None: for any)."""
        with self._lock:
            return sum(1 for e in self._entries
                       if (key is None or e.key == key) and e.up.is_set() and e.ok)

    def wait_ready(self, key: Key, timeout: float) -> bool:
        """Wait at most `timeout` seconds until one is ready for `key` (benches and tests)."""
        return self.wait_for(lambda: self.ready(key) >= 1, timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait at most `timeout` seconds until `predicate()` (asked whenever the pool's state
        changes) holds; whether it does."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def close(self) -> None:
        """Stop every warm sandbox not yet taken, wait for the used ones being stopped, and
        warm no more."""
        with self._lock:
            self._closed = True
            idle = [e for e in self._entries if e.up.is_set()]
            for entry in idle:
                entry.claimed = True
                self._entries.remove(entry)
        for entry in idle:
            self._discard(entry)
        self._queue.put(None)
        with self._lock:
            waited = [*self._ending, *([self._starter] if self._starter is not None else [])]
        for thread in waited:  # used ones being stopped, one starting: each bounded
            thread.join(CLOSE_SECONDS)

    # -- keeping -------------------------------------------------------------------------------
    def _refill(self, key: Key) -> None:
        with self._lock:
            if self._closed or key not in self._wanted or self._failures >= _FAILURES:
                return
            have = sum(1 for e in self._entries if e.key == key)
            room = self.size - have
            if self.cap is not None:
                room = min(room, self.cap - self.live)
            new = [Warm(key) for _ in range(max(0, room))]
            self._entries += new
            self.live += len(new)
            self.peak = max(self.peak, self.live)
            self.started += len(new)
            if new and self._starter is None:
                self._starter = threading.Thread(target=self._start_all, name="byref-warm",
                                                 daemon=True)
                self._starter.start()
        for entry in new:
            self._queue.put(entry)

    def _start_all(self) -> None:
        """The pool's thread: starts each queued sandbox and waits until it is ready."""
        while (entry := self._queue.get()) is not None:
            ok = False
            with self._lock:
                wasted = self._closed and not entry.claimed
            try:
                if not wasted:
                    self._start(entry)
                    ok = entry.launch is not None and entry.launch.ready(self.ready_timeout)
            except IsolationUnavailable:
                with self._lock:
                    self._failures = _FAILURES  # never here: each run refuses, saying why
            except Exception as exc:  # no descriptors left, say: runs start cold
                log.warning("byref: a warm sandbox could not start (%s: %s)",
                            type(exc).__name__, exc)
            with self._lock:
                entry.ok = ok
                self._failures = 0 if ok else min(_FAILURES, self._failures + 1)
                orphan = not entry.claimed and (not ok or self._closed)
                if orphan:
                    entry.claimed = True
                    if entry in self._entries:
                        self._entries.remove(entry)
            entry.up.set()
            with self._changed:
                self._changed.notify_all()
            if orphan:
                self._discard(entry)
                self._refill(entry.key)
            elif ok:
                threading.Thread(target=self._watch, args=(entry,), name="byref-warm-watch",
                                 daemon=True).start()

    def _watch(self, entry: Warm) -> None:
        """While `entry` waits unclaimed: discard it if it dies (then replace it) or idles."""
        until = time.monotonic() + (self.idle if self.idle is not None else float("inf"))
        while True:
            time.sleep(WATCH_SECONDS)
            with self._lock:
                if entry.claimed:
                    return
                dead = entry.launch is None or not entry.launch.waiting()
                if not dead and time.monotonic() < until:
                    continue
                entry.claimed = True
                self._entries.remove(entry)
                if not dead:
                    self._wanted.discard(entry.key)  # idle: warmed again when a run asks
            self._discard(entry)
            if dead:
                log.warning("byref: a warm sandbox died before its run; replacing it")
                self._refill(entry.key)
            return

    def _discard(self, entry: Warm, *, used: bool = False) -> None:
        with self._lock:
            if entry.gone:
                return
            entry.gone = True
            self.live -= 1
            if not used:
                self.discarded += 1
        stop(entry)
        with self._changed:
            self._changed.notify_all()


def stop(entry: Warm) -> None:
    """Stop `entry`'s sandbox and remove its files (idempotent)."""
    if entry.launch is not None:
        entry.launch.close_pipes()  # a child still waiting for its program exits at this
        with contextlib.suppress(Exception):  # already gone: nothing left to stop
            entry.launch.reap()
    if entry.channel is not None:
        entry.channel.close()
    if entry.stage is not None:
        entry.stage.close()


class Prepared:
    """A run's sandbox-to-be: its staging area and the host's end of its tool channel (`stage`,
    `channel`) now, its program at `run`; `close` when done, however it went."""

    stage: StagingArea
    channel: socket.socket | None
    warm: bool

    def run(self, code: str) -> RunOutcome:
        """Run `code` in the sandbox; how it ended."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop what is left of the sandbox and remove its files."""
        raise NotImplementedError

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ColdPrepared(Prepared):
    """A sandbox started at `run`, with its program, by `runner.run`."""

    def __init__(self, runner: CodeRunner, limits: Limits, bootstrap: str | None,
                 channel: bool) -> None:
        self.runner = runner
        self.limits = limits
        self.bootstrap = bootstrap
        self.stage = StagingArea()
        self.channel = None
        self._child: socket.socket | None = None
        if channel:
            self.channel, self._child = socket.socketpair()
        self.warm = False

    def run(self, code: str) -> RunOutcome:
        """Start the sandbox with `code` and run it to its end."""
        child, self._child = self._child, None
        if child is None and self.bootstrap is None:  # run_python's own call, as it always was
            return self.runner.run(code, self.stage, self.limits)
        return self.runner.run(code, self.stage, self.limits,
                               channel=None if child is None else child.detach(),
                               bootstrap=self.bootstrap)

    def close(self) -> None:
        """Remove the staging area and close the channel."""
        for sock in (self.channel, self._child):
            if sock is not None:
                sock.close()
        self.stage.close()


class WarmPrepared(Prepared):
    """A run's warm sandbox, taken from `pool`: `run` gives it its program."""

    def __init__(self, pool: WarmPool, entry: Warm) -> None:
        if entry.stage is None or entry.launch is None:
            raise MisuseError("A warm sandbox is handed out only once started.")
        self.pool = pool
        self.entry = entry
        self.launch: Launch = entry.launch
        self.stage = entry.stage
        self.channel = entry.channel
        self.warm = True

    def run(self, code: str) -> RunOutcome:
        """Give the waiting child `code`; how its run ended."""
        self.launch.go(code)
        return self.launch.finish()

    def close(self) -> None:
        """Stop what is left of the sandbox, remove its files, free its place in the pool."""
        self.pool.release(self.entry)
