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
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from byref.errors import InvalidValue
from byref.tools.run_python import sandbox_init, syscalls
from byref.tools.run_python.sandbox import (
    IsolationUnavailable,
    Sandbox,
    developer_message,
    kill_namespace,
    minimal_env,
)

log = logging.getLogger("byref.tools")

# Runs before the user's code: an audit hook refuses every socket, so Python code learns why in
# plain words (the sandbox's empty network namespace stops everything else, ctypes included).
_BOOTSTRAP = """
import runpy, sys
def _no_network(event, args):
    if event.startswith("socket.") and event not in ("socket.gethostname",):
        raise PermissionError("network access is disabled in run_python")
sys.addaudithook(_no_network)
sys.argv = ["main.py"]
runpy.run_path("main.py", run_name="__main__")
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


@dataclass(frozen=True, slots=True)
class Limits:
    """The resource limits of one run_python run: CPU, memory, wall time, file size, processes,
    output files and bytes, and stdout shown."""
    cpu_seconds: int = 20
    memory_bytes: int = 1 << 30
    wall_seconds: float = 60.0
    file_bytes: int = 256 << 20
    max_output_files: int = 32
    max_output_bytes: int = 64 << 20
    max_stdout_chars: int = 4_000
    max_processes: int = 64
    """Processes and threads at once, the sandbox's init included (isolated runs only)."""
    disk_bytes: int = 256 << 20
    """Bytes written in all to /tmp, /dev/shm and the working directory (isolated runs)."""
    disk_files: int = 16_384
    """Files and directories there at once (each costs kernel memory that bytes do not count;
    under `unshare`; bwrap cannot cap them)."""
    max_open_files: int = 256
    """Descriptors the code's process holds at once: with the syscall filter, what bounds the
    kernel memory left outside the budgets above (pipes of 64 KiB, open files)."""


@dataclass(frozen=True, slots=True)
class StagedInput:
    """One input staged for the code: its name, file, media type and size."""
    name: str
    path: Path
    media_type: str
    bytes: int
    ref: str | None = None
    kind: str | None = None


@dataclass
class RunOutcome:
    """How a run ended: exit code, output, which limit stopped it, and the files it wrote."""
    exit_code: int
    stdout: str
    stderr: str
    stopped: str | None = None
    """Which limit stopped the run: 'cpu', 'memory', 'wall', 'disk', 'file-size',
    'processes', 'output-files', 'output-bytes'."""
    outputs: list[Path] | None = None
    """Files found in the output directory; None would mean the runner cannot tell."""
    refused_outputs: list[tuple[str, str]] = field(default_factory=list)
    """(name as shown, why) of output files that could not be kept."""
    isolated_network: bool = False
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)
    isolation: str = "none"
    """'bwrap' or 'unshare' (the tool that made the sandbox), or 'none'."""


class CodeRunner(Protocol):
    """Runs code in a staging area under limits."""
    def run(self, code: str, stage: StagingArea, limits: Limits, *,
            channel: int | None = None, bootstrap: str | None = None) -> RunOutcome:
        """Run `code` in `stage` under `limits`; returns how it ended. `channel`: a descriptor
        the code's process keeps (code mode's tool channel; the runner closes its copy);
        `bootstrap`: the program that runs main.py, instead of the plain one."""


class StagingArea:
    """A private working directory with `inputs/` and `outputs/`; removed on close.

    `root` is the code's working directory (in the sandbox, a tmpfs at that path); beside it in
    `base`, out of the code's sight, are the seed (main.py and the manifest, which the init
    copies into `root`), the directory the init copies the output files into, the sandbox's own
    files and the files the code's stdout and stderr go to.
    """

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="byref-run-")
        self.base = Path(self._tmp.name)
        self.root = self.base / "work"
        self.inputs = self.root / "inputs"
        self.outputs = self.root / "outputs"
        self.seed = self.base / "seed"
        self.collected = self.base / "collected"
        for path in (self.inputs, self.outputs, self.seed, self.collected):
            path.mkdir(parents=True)
        self.manifest = self.seed / "inputs.json"
        """Where the manifest is written; the code reads it as `root`/inputs.json."""

    def close(self) -> None:
        """Remove the directory and everything in it."""
        self._tmp.cleanup()

    def __enter__(self) -> StagingArea:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SubprocessRunner:
    """Runs Python in a sandboxed child process of this interpreter, under rlimits.

    `isolation="required"` (the default) refuses to run where no sandbox can be made, raising
    IsolationUnavailable; `isolation="none"` runs the code as a plain child process that can
    read what this process can read — for trusted local use only.
    """

    def __init__(self, python: str = sys.executable, *,
                 isolation: Literal["required", "none"] = "required",
                 sandbox: Sandbox | None = None) -> None:
        if isolation not in ("required", "none"):
            raise InvalidValue(f"isolation must be 'required' or 'none', not {isolation!r}")
        self.python = python
        self.isolation = isolation
        self.sandbox = sandbox or Sandbox()
        self._warned = False

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
            if not self._warned:
                self._warned = True
                log.warning("%s", developer_message(exc.reason))
            raise
        (stage.seed / "main.py").write_text(code)
        if not stage.manifest.exists():
            stage.manifest.write_text("{}")
        paths = [stage.base / name for name in ("stdout", "stderr", "launcher")]
        read_status, write_status = os.pipe()
        try:
            proc, isolation = self._launch(stage, limits, write_status, paths, channel,
                                           bootstrap or _BOOTSTRAP)
            try:
                stopped = self._wait(proc, limits, isolation != "none")
                report = _read_report(read_status)
            except BaseException:
                self._stop(proc, isolation != "none")  # interrupted: nothing outlives the call
                raise
        finally:
            os.close(read_status)
        stdout, stderr, launcher = (_tail(p) for p in paths)
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
                             isolated_network=isolation != "none", workdir=stage.root,
                             isolation=isolation)
        outcome.outputs = [stage.collected / str(i) / name
                           for i, name in enumerate(report.get("files", []))]
        outcome.refused_outputs = [(name, why) for name, why in report.get("refused", [])]
        outcome.notes = list(report.get("notes", []))
        return outcome

    def _launch(self, stage: StagingArea, limits: Limits, write_status: int,
                paths: list[Path], channel: int | None,
                bootstrap: str) -> tuple[subprocess.Popen[bytes], str]:
        """Start the init (in the sandbox, unless isolation is 'none'); closes `write_status`
        and `channel`."""
        isolated = self.isolation == "required"
        env = minimal_env(stage.root) | {"BYREF_INPUTS": str(stage.root / "inputs.json"),
                                         "BYREF_OUTPUT_DIR": str(stage.outputs)}
        if channel is not None:
            env["BYREF_CHANNEL_FD"] = str(channel)
        # Files, not pipes: a process that keeps stdout open cannot hold the call past EOF.
        out, err, launcher_err = (os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                                  for p in paths)
        program = syscalls.program() if isolated else ""
        fds = {"status": write_status, "out": out, "err": err,
               "filter": _memfd(program) if isinstance(program, bytes) else -1,
               "collect": os.open(stage.collected, os.O_RDONLY | os.O_DIRECTORY),
               "channel": -1 if channel is None else channel}
        try:
            config = {"fds": fds, "seed": str(stage.seed), "outputs": str(stage.outputs),
                      "cpu": limits.cpu_seconds, "memory": limits.memory_bytes,
                      "file_bytes": limits.file_bytes, "open_files": limits.max_open_files,
                      "processes": limits.max_processes if isolated else -1,
                      "max_files": limits.max_output_files, "max_bytes": limits.max_output_bytes,
                      "scratch": [str(stage.root), "/tmp", "/dev/shm"] if isolated else []}
            argv = [self.python, "-I", "-S", "-c", _INIT, marshal.dumps(config).hex(), "--",
                    self.python, "-I", "-c", bootstrap]
            isolation = "none"
            if isolated:
                isolation = self.sandbox.backend(self.python)[0]
                argv = self.sandbox.command(
                    self.python, work=stage.root, inputs=stage.inputs, seed=stage.seed,
                    writable=(stage.collected,), private=stage.base / "sandbox",
                    disk_bytes=limits.disk_bytes, disk_files=limits.disk_files,
                    inner=argv)
            proc = subprocess.Popen(argv, cwd=stage.base if isolated else stage.root, env=env,
                                    stdin=subprocess.DEVNULL, stdout=launcher_err,
                                    stderr=launcher_err,
                                    pass_fds=tuple(fd for fd in fds.values() if fd >= 0),
                                    start_new_session=True)
        finally:
            for fd in (launcher_err, *fds.values()):
                if fd >= 0:
                    os.close(fd)
        return proc, isolation

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], limits: Limits, isolated: bool) -> str | None:
        if _exited_within(proc, limits.wall_seconds):
            return None
        SubprocessRunner._stop(proc, isolated)
        return "wall"

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], isolated: bool) -> None:
        if proc.poll() is not None:
            return
        if isolated:
            kill_namespace(proc)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


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


def _read_report(fd: int) -> dict[str, Any] | None:
    """What the init reported (wait status, files…); None if it never got that far."""
    deadline = time.monotonic() + 5
    data = b""
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    try:
        # Written by the init alone (the code never holds this pipe): plain values only.
        report = marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None
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
