"""One sandbox's life, from its start to the init's report: `Launch`.

A launch is started either with its program already in the seed (cold: the init copies it and
the code's interpreter starts), or warm: the code's interpreter starts, imports what its
bootstrap imports, compiles the bootstrap, says it is ready on a pipe, and waits on another for
`go` (the host holds a pidfd of it, so one that died or was stopped is never handed out); only
then is the program written to the seed, which the code copies into its work
directory before the bootstrap runs it. Either way the sandbox, its tmpfs, its rlimits, its
syscall filter and its pipes are this launch's alone, and a launch runs one program: warmth
moves the start ahead of the call, it shares nothing between runs. The wall clock starts at
`go` (the start's CPU counts in the run's CPU budget: it is the code's own process).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import marshal
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from byref.errors import MisuseError
from byref.tools.run_python import sandbox_init, syscalls
from byref.tools.run_python.sandbox import Sandbox, kill_namespace, minimal_env
from byref.tools.run_python.stage import Limits, RunOutcome, StagingArea

# Runs before the user's code: an audit hook refuses every socket, so Python code learns why in
# plain words (the sandbox's empty network namespace stops everything else, ctypes included).
# pkgutil: what run_path imports (re, typing, enum…), imported ahead by a warm child.
BOOTSTRAP = """
import pkgutil, runpy, sys
def _no_network(event, args):
    if event.startswith("socket.") and event not in ("socket.gethostname",):
        raise PermissionError("network access is disabled in run_python")
sys.addaudithook(_no_network)
sys.argv = ["main.py"]
runpy.run_path("main.py", run_name="__main__")
"""

# The warm child's prelude: the bootstrap's imports done and its code compiled before `go`; the
# prelude's own names are gone before the bootstrap runs.
_WARM = """
import os
for _m in {modules!r}:
    try:
        __import__(_m)
    except ImportError:
        pass
_go, _ready = int(os.environ.pop("BYREF_GO_FD")), int(os.environ.pop("BYREF_READY_FD"))
_seed = os.environ.pop("BYREF_SEED")
_code = compile({source!r}, "<string>", "exec")
# What is loaded now lives as long as the process: out of the collector's sight, the exit's
# collections skip it (a third of an empty run's time, measured, was the exit's).
__import__("gc").freeze()
os.write(_ready, b"r")
os.close(_ready)
_said = os.read(_go, 1)
os.close(_go)
if _said != b"g":
    os._exit(0)
for _m in ("main.py", "inputs.json"):
    with open(os.path.join(_seed, _m), "rb") as _src, open(_m, "wb") as _dst:
        _dst.write(_src.read())
del _go, _ready, _seed, _said, _m, _src, _dst
exec(_code)
"""

# The sandbox's init (its pid 1): its own module, run as a program (it imports nothing of byref).
_INIT = Path(sandbox_init.__file__).read_text()
_TAIL = 256 << 10
_FORK_FAILED = ("BlockingIOError: [Errno 11]", "Resource temporarily unavailable",
                "Cannot fork", "can't fork", "can't start new thread")
_TOO_LARGE = ("[Errno 27] File too large", "File size limit exceeded")
_DISK_FULL = ("[Errno 28] No space left on device",)
# Less free space than this on the run's tmpfs, after a failed run: the disk budget was hit.
_NEARLY_FULL = 1 << 20


class Launch:
    """One sandboxed run's processes and pipes: `start`, (warm: `ready`, `go`), `finish`.

    `sandbox` None runs the init as a plain child (isolation 'none').
    """

    def __init__(self, python: str, sandbox: Sandbox | None, stage: StagingArea,
                 limits: Limits, bootstrap: str, *, warm: bool) -> None:
        self.python = python
        self.sandbox = sandbox
        self.stage = stage
        self.limits = limits
        self.bootstrap = bootstrap
        self.warm = warm
        self.isolation = "none"
        self.proc: subprocess.Popen[bytes] | None = None
        self._status = -1
        self._go = -1
        self._ready = -1
        self._child = -1
        self._child_pid = 0
        self._paths = [stage.base / name for name in ("stdout", "stderr", "launcher")]

    def start(self, channel: int | None = None) -> None:
        """Start the init (in the sandbox, unless `sandbox` is None); closes `channel` (the
        code's end of its tool channel), whatever happens."""
        stage, limits = self.stage, self.limits
        isolated = self.sandbox is not None
        env = minimal_env(stage.root) | {"BYREF_INPUTS": str(stage.root / "inputs.json"),
                                         "BYREF_OUTPUT_DIR": str(stage.outputs)}
        if channel is not None:
            env["BYREF_CHANNEL_FD"] = str(channel)
        read_status, write_status = os.pipe()
        self._status = read_status
        code_fds = {"channel": -1 if channel is None else channel, "go": -1, "ready": -1}
        if self.warm:
            go_r, self._go = os.pipe()
            self._ready, ready_w = os.pipe()
            code_fds |= {"go": go_r, "ready": ready_w}
            env |= {"BYREF_GO_FD": str(go_r), "BYREF_READY_FD": str(ready_w),
                    "BYREF_SEED": str(stage.seed)}
        # Files, not pipes: a process that keeps stdout open cannot hold the call past EOF.
        out, err, launcher_err = (os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                                  for p in self._paths)
        program = syscalls.program() if isolated else ""
        fds = {"status": write_status, "out": out, "err": err,
               "filter": _memfd(program) if isinstance(program, bytes) else -1,
               "collect": os.open(stage.collected, os.O_RDONLY | os.O_DIRECTORY), **code_fds}
        try:
            config = {"fds": fds, "seed": str(stage.seed), "outputs": str(stage.outputs),
                      "warm": self.warm,
                      "cpu": limits.cpu_seconds, "memory": limits.memory_bytes,
                      "file_bytes": limits.file_bytes, "open_files": limits.max_open_files,
                      "processes": limits.max_processes if isolated else -1,
                      "max_files": limits.max_output_files, "max_bytes": limits.max_output_bytes,
                      "scratch": [str(stage.root), "/tmp", "/dev/shm"] if isolated else []}
            code = warm_source(self.bootstrap) if self.warm else self.bootstrap
            argv = [self.python, "-I", "-S", "-c", _INIT, marshal.dumps(config).hex(), "--",
                    self.python, "-I", "-c", code]
            if self.sandbox is not None:
                self.isolation = self.sandbox.backend(self.python)[0]
                argv = self.sandbox.command(
                    self.python, work=stage.root, inputs=stage.inputs, seed=stage.seed,
                    writable=(stage.collected,), private=stage.base / "sandbox",
                    disk_bytes=limits.disk_bytes, disk_files=limits.disk_files,
                    inner=argv)
            self.proc = subprocess.Popen(
                argv, cwd=stage.base if isolated else stage.root, env=env,
                stdin=subprocess.DEVNULL, stdout=launcher_err, stderr=launcher_err,
                pass_fds=tuple(fd for fd in fds.values() if fd >= 0), start_new_session=True)
        finally:
            for fd in (launcher_err, *fds.values()):
                if fd >= 0:
                    os.close(fd)

    # -- warm ----------------------------------------------------------------------------------
    def ready(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the warm child to say it is ready; then hold a
        pidfd of it, so `waiting` can tell at once whether it still is."""
        if self._ready < 0 or self.proc is None:
            return False
        try:
            said = (os.read(self._ready, 1)
                    if select.select([self._ready], [], [], timeout)[0] else b"")
        finally:
            os.close(self._ready)
            self._ready = -1
        if said != b"r":
            return False
        pid = _warm_child(self.proc.pid)
        if pid is None:
            return False
        try:
            self._child = os.pidfd_open(pid)
        except OSError:
            return False
        self._child_pid = pid
        return self.waiting()

    def waiting(self) -> bool:
        """Whether the warm child is alive, not stopped, and its init has not reported: still
        waiting for its program. Asks the kernel, never the child (no wakeup, no round trip)."""
        if not self.alive() or self._child < 0 or select.select([self._child], [], [], 0)[0]:
            return False  # the pidfd is readable once the child has exited
        try:  # the pidfd is not readable: the pid is still this child's
            stat = Path(f"/proc/{self._child_pid}/stat").read_bytes()
        except OSError:
            return False
        # Asleep on its pipe (S) or about to be (R); not stopped (T, t) nor a zombie (Z).
        return stat[stat.rindex(b")") + 2:][:1] in (b"S", b"R")

    def alive(self) -> bool:
        """Whether the sandbox still runs and its init has not reported (its code not dead)."""
        if self.proc is None or self.proc.poll() is not None or self._status < 0:
            return False
        return not select.select([self._status], [], [], 0)[0]

    def go(self, code: str) -> None:
        """Give the warm child its program: it starts now."""
        self._seed(code)
        try:
            os.write(self._go, b"g")
        except OSError:
            pass  # it died waiting: its report (or none) says so
        finally:
            os.close(self._go)
            self._go = -1

    def _seed(self, code: str) -> None:
        (self.stage.seed / "main.py").write_text(code)
        if not self.stage.manifest.exists():
            self.stage.manifest.write_text("{}")

    # -- the run -------------------------------------------------------------------------------
    def run_cold(self, code: str, channel: int | None) -> RunOutcome:
        """Seed `code`, start, and run to the end (the runner's one-shot path)."""
        self._seed(code)
        try:
            self.start(channel)
            return self.finish()
        finally:
            self.close_pipes()
            self.reap()

    def finish(self) -> RunOutcome:
        """Wait for the run (within its wall clock), read the init's report, say how it
        ended; nothing of the run outlives this call."""
        proc = self.proc
        if proc is None:
            raise MisuseError("Launch.finish() needs Launch.start() first.")
        try:
            stopped = None
            report = _reported_within(proc, self._status, self.limits.wall_seconds)
            if report is None:
                if not _exited_within(proc, 0):
                    self.stop()
                    stopped = "wall"
                report = _read_report(self._status)
        except BaseException:
            self.stop()  # interrupted: nothing outlives the call
            raise
        finally:
            self.close_pipes()
        stdout, stderr, launcher = (_tail(p) for p in self._paths)
        if report is None and stopped is None:
            # The init never reported: the sandbox itself failed; say what it said.
            stderr += launcher
        report = report or {}
        status = report.get("wait")
        exit_code = (os.waitstatus_to_exitcode(status) if isinstance(status, int)
                     else proc.returncode)
        if stopped is None:
            stopped = _limit_hit(exit_code, stderr, report.get("free"))
        outcome = RunOutcome(exit_code, stdout, stderr, stopped or report.get("stopped"),
                             isolated_network=self.isolation != "none",
                             workdir=self.stage.root, isolation=self.isolation)
        outcome.outputs = [self.stage.collected / str(i) / name
                           for i, name in enumerate(report.get("files", []))]
        outcome.refused_outputs = [(name, why) for name, why in report.get("refused", [])]
        outcome.notes = list(report.get("notes", []))
        return outcome

    def reap(self, grace: float = 5.0) -> None:
        """Wait at most `grace` seconds for the launcher to exit by itself (a run that reported,
        a warm child whose `go` pipe was closed), then stop it."""
        if self.proc is not None and not _exited_within(self.proc, grace):
            self.stop()

    def stop(self) -> None:
        """Kill whatever of the sandbox still runs, and wait for its launcher."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if self.sandbox is not None:
            kill_namespace(proc)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def close_pipes(self) -> None:
        """Close the host's ends of the launch's pipes (idempotent)."""
        for name in ("_status", "_go", "_ready", "_child"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                with contextlib.suppress(OSError):
                    os.close(fd)


def _warm_child(launcher: int) -> int | None:
    """The pid (as this host sees it) of the launcher's descendant that is the warm child:
    the only one holding a `go` pipe in its environment's prelude, found by its command line."""
    todo, seen = [launcher], 0
    while todo and seen < 64:
        pid, seen = todo.pop(), seen + 1
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if argv[1:3] == [b"-I", b"-c"] and len(argv) > 3 and b"BYREF_GO_FD" in argv[3]:
            return pid
    return None


@functools.cache
def warm_source(bootstrap: str) -> str:
    """The warm child's program: `bootstrap`'s top-level imports done, then wait for `go`."""
    modules: list[str] = []
    for node in ast.parse(bootstrap).body:
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.append(node.module)
    return _WARM.format(modules=tuple(dict.fromkeys(modules)), source=bootstrap)


def _reported_within(proc: subprocess.Popen[bytes], fd: int,
                     seconds: float) -> dict[str, Any] | None:
    """The init's report, read as soon as it is whole (the run is over then: the init has
    killed and reaped everything else in the sandbox; the namespace's teardown and the
    launcher's exit are `stop`'s, later); None if the launcher exits without one, or after
    `seconds`."""
    deadline = time.monotonic() + seconds
    data = b""
    try:
        pidfd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else -1
    except OSError:
        pidfd = -1
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready = select.select([fd] + ([pidfd] if pidfd >= 0 else []), [], [],
                                  left if pidfd >= 0 else min(left, 0.05))[0]
            if fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return _parsed(data)
                data += chunk
                report = _parsed(data)
                if report is not None:
                    return report
            elif ready or proc.poll() is not None:  # gone without a word (or not yet whole)
                return _read_report(fd, data)
        return None
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _exited_within(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait for the launcher at most `seconds`; a pidfd wakes at once (Popen.wait polls)."""
    try:
        pidfd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else -1
    except OSError:
        pidfd = -1
    try:
        if pidfd >= 0:
            if not select.select([pidfd], [], [], seconds)[0]:
                return False
            seconds = 5  # it has exited: the wait below reaps it at once
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("byref-seccomp", 0)  # not close-on-exec: the init reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_report(fd: int, data: bytes = b"") -> dict[str, Any] | None:
    """What the init reported (wait status, files…); None if it never got that far."""
    deadline = time.monotonic() + 5
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return _parsed(data)


def _parsed(data: bytes) -> dict[str, Any] | None:
    try:
        # Written by the init alone (the code never holds this pipe): plain values only.
        report = marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None  # not (yet) a whole report
    return report if isinstance(report, dict) and isinstance(report.get("wait"), int) else None


def _limit_hit(exit_code: int, stderr: str, free: int | None = None) -> str | None:
    # The soft CPU limit sends SIGXCPU; code that ignores it meets the hard limit's SIGKILL.
    if exit_code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu"
    if "MemoryError" in stderr or exit_code == -signal.SIGSEGV:
        return "memory"
    if exit_code == -signal.SIGXFSZ:
        return "file-size"
    if exit_code == 0:
        return None
    tail = stderr[-2_000:]
    if any(s in tail for s in _DISK_FULL) or (free is not None and free < _NEARLY_FULL):
        return "disk"
    if any(s in tail for s in _TOO_LARGE):  # Python ignores SIGXFSZ: the write fails instead
        return "file-size"
    if any(s in tail for s in _FORK_FAILED):
        return "processes"
    return None


def _tail(path: Path) -> str:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - _TAIL))
        return fh.read().decode("utf-8", errors="replace")
