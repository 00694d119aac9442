"""The code runner port and its real implementation: a limited, isolated subprocess.

The law: code runs in its own working directory, in a sandbox (`run_python.sandbox`) that shows
it only that directory, its staged inputs and the interpreter — no host processes, files,
secrets or network — under CPU-time, memory, disk, file-size, process-count and wall-clock
limits that hold for the whole run: one tmpfs of the disk budget holds every place it can
write, and a syscall filter (`byref.tools.run_python.syscalls`) keeps it to one process and
refuses every other way to make the host hold memory (memfd, IPC, sockets, grown pipes), so one
address-space limit is its whole memory and a descriptor limit bounds the kernel's share.
Where a limit can only hold per process, `unenforced()` says which, for the tool's description
and its refusals. Inputs arrive as staged files named by a JSON manifest (`BYREF_INPUTS`);
outputs are only what lands in the declared directory (`BYREF_OUTPUT_DIR`), copied out by the
sandbox's init (`run_python.sandbox_init`) with bounded size and count. Hitting a limit stops
the run and says which limit, never the machine. When the code's process ends, the run is
over: nothing it started outlives the call. Where no sandbox can be made, the runner refuses,
unless built with `isolation="none"` for trusted local use.

Warm starts (`warm=N`): `prepare` hands a run a sandbox already started, its interpreter up and
waiting for its program (`run_python.warm`): one sandbox a run, never reused, replaced in the
background; at most N ready a kind of run and `cap` sandboxes alive in all.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import weakref
from typing import Literal

from byref.errors import InvalidValue
from byref.tools.run_python import syscalls
from byref.tools.run_python.launch import BOOTSTRAP, Launch
from byref.tools.run_python.sandbox import IsolationUnavailable, Sandbox, developer_message
from byref.tools.run_python.stage import CodeRunner as CodeRunner
from byref.tools.run_python.stage import Limits as Limits
from byref.tools.run_python.stage import RunOutcome as RunOutcome
from byref.tools.run_python.stage import StagedInput as StagedInput
from byref.tools.run_python.stage import StagingArea as StagingArea
from byref.tools.run_python.warm import ColdPrepared, Key, Prepared, Warm, WarmPool, WarmPrepared

log = logging.getLogger("byref.tools")


class SubprocessRunner:
    """Runs Python in a sandboxed child process of this interpreter, under rlimits.

    `isolation="required"` (the default) refuses to run where no sandbox can be made, raising
    IsolationUnavailable; `isolation="none"` runs the code as a plain child process that can
    read what this process can read — for trusted local use only. `warm`: sandboxes kept
    started ahead for each kind of run `prepare` is asked for (0: none); `cap`: sandboxes
    alive at once, warm and running, at most; `idle`: seconds an unused warm one is kept (None:
    until `close`).
    """

    def __init__(self, python: str = sys.executable, *,
                 isolation: Literal["required", "none"] = "required",
                 sandbox: Sandbox | None = None, warm: int = 0, cap: int | None = None,
                 idle: float | None = 300.0) -> None:
        if isolation not in ("required", "none"):
            raise InvalidValue(f"isolation must be 'required' or 'none', not {isolation!r}")
        if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
            raise InvalidValue(f"warm must be a whole number of sandboxes, 0 or more, not "
                               f"{warm!r}")
        self.python = python
        self.isolation = isolation
        self.sandbox = sandbox or Sandbox()
        self._warned = False
        self.pool: WarmPool | None = None
        """Sandboxes started ahead of their runs (None: every run starts cold)."""
        if warm:
            sandbox_ = self.sandbox if isolation == "required" else None
            self.pool = WarmPool(functools.partial(_start_warm, python, sandbox_), size=warm,
                                 cap=cap, idle=idle)
            weakref.finalize(self, self.pool.close)

    def unenforced(self) -> list[str]:
        """The limits this runner can hold only per process or per file, in the words the
        tool's description and refusals use; empty when every limit holds for the whole run."""
        if self.isolation == "none":
            return ["this runner is not isolated, so memory is per process and disk per file"]
        said = []
        missing = syscalls.unavailable()
        if missing is not None:
            said.append(f"memory is per process, as this host has no syscall filter ({missing})")
        try:
            backend = self.sandbox.backend(self.python)[0]
        except IsolationUnavailable:
            backend = None  # every run is refused, saying why
        if backend == "bwrap":
            said.append("under bwrap the disk budget is split (a quarter for /tmp, a quarter "
                        "for /dev/shm, half for the working directory) and files are not "
                        "counted")
        return said

    def check(self) -> None:
        """Raise IsolationUnavailable now if runs would be refused (for a check at startup)."""
        if self.isolation == "required":
            self.sandbox.backend(self.python)

    def run(self, code: str, stage: StagingArea, limits: Limits, *,
            channel: int | None = None, bootstrap: str | None = None) -> RunOutcome:
        """Run `code` in a sandboxed child process; raises `IsolationUnavailable` when it cannot
        isolate (warning once). `channel` is a descriptor only the code's process keeps open
        (this call closes it, whatever happens); `bootstrap` replaces the program that runs
        main.py."""
        try:
            self.check()
        except IsolationUnavailable as exc:
            if channel is not None:
                os.close(channel)
            self._warn(exc)
            raise
        sandbox = self.sandbox if self.isolation == "required" else None
        launch = Launch(self.python, sandbox, stage, limits, bootstrap or BOOTSTRAP, warm=False)
        if self.pool is None:
            return launch.run_cold(code, channel)
        with self.pool.counted():
            return launch.run_cold(code, channel)

    def prepare(self, limits: Limits, *, bootstrap: str | None = None,
                channel: bool = False) -> Prepared:
        """A sandbox for one run of `limits` and `bootstrap` (with a tool channel if `channel`):
        a warm one when the pool has one, else one that starts with its program. Raises
        `IsolationUnavailable` as `run` does."""
        key: Key = (limits, bootstrap or BOOTSTRAP, channel)
        if self.pool is not None and self.unavailable() is None:
            entry = self.pool.take(key)
            if entry is not None:
                return WarmPrepared(self.pool, entry)
        return ColdPrepared(self, limits, bootstrap, channel)

    def warm_up(self, limits: Limits, *, bootstrap: str | None = None,
                channel: bool = False) -> None:
        """Start warming sandboxes for runs of this kind now (no-op without a pool). Returns at
        once: whether a sandbox can be made here is found by the pool's thread."""
        if self.pool is not None:
            self.pool.want((limits, bootstrap or BOOTSTRAP, channel))

    def unavailable(self) -> str | None:
        """Why runs would be refused here, or None."""
        if self.isolation == "none":
            return None
        return self.sandbox.unavailable(self.python)

    def close(self) -> None:
        """Stop the warm sandboxes not yet taken (runs in progress end as they would)."""
        if self.pool is not None:
            self.pool.close()

    def _warn(self, exc: IsolationUnavailable) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s", developer_message(exc.reason))


def prepare(runner: CodeRunner, limits: Limits, *, bootstrap: str | None = None,
            channel: bool = False) -> Prepared:
    """A sandbox-to-be for one run through `runner` (warm where the runner keeps some)."""
    if isinstance(runner, SubprocessRunner):
        return runner.prepare(limits, bootstrap=bootstrap, channel=channel)
    return ColdPrepared(runner, limits, bootstrap, channel)


def _start_warm(python: str, sandbox: Sandbox | None, entry: Warm) -> None:
    """Start `entry`'s sandbox warm: its stage, its channel, its launch."""
    limits, bootstrap, channel = entry.key
    if sandbox is not None:
        sandbox.backend(python)  # IsolationUnavailable: no warming here (runs refuse, saying why)
    entry.stage = StagingArea()
    child: socket.socket | None = None
    if channel:
        entry.channel, child = socket.socketpair()
    entry.launch = Launch(python, sandbox, entry.stage, limits, bootstrap, warm=True)
    entry.launch.start(None if child is None else child.detach())
