"""The code runner port and its real implementation: a limited, isolated subprocess.

The law: code runs in its own working directory, in a sandbox (`byref.tools.sandbox`) that shows
it only that directory, its staged inputs and the interpreter — no host processes, files,
secrets or network — under CPU-time, memory, file-size, process-count and wall-clock limits;
inputs arrive as staged files named by a JSON manifest (`BYREF_INPUTS`); outputs are only what
lands in the declared directory (`BYREF_OUTPUT_DIR`), read back with bounded size and count.
Hitting a limit stops the run and says which limit, never the machine. When the whole process
tree is gone, the run is over: nothing it started outlives the call. Where no sandbox can be
made, the runner refuses, unless built with `isolation="none"` for trusted local use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from byref.errors import InvalidValue
from byref.tools.sandbox import (
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

# The sandbox's init (its pid 1): applies the limits to the code's process, gives it
# the stdout/stderr files (the launcher's own messages stay apart), reaps orphans, and reports
# the code's exact wait status on a pipe the code never holds (an exit code alone cannot tell a
# signal from `sys.exit(128 + n)`). Its exit ends the pid namespace, and all within it.
_INIT = """
import os, resource, sys
status, out, err = (int(v) for v in sys.argv[1:4])
cpu, mem, fsize, nproc = (int(v) for v in sys.argv[4:8])
keep = sorted({status, out, err})
os.closerange(3, keep[0])
for low, high in zip(keep, [*keep[1:], 1024]):
    os.closerange(low + 1, high)
pid = os.fork()
if pid == 0:
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in keep:
        os.close(fd)
    for name in ("PWD", "OLDPWD"):  # set by the shells and bwrap on the way: not the allowlist
        os.environ.pop(name, None)
    for res, soft, hard in ((resource.RLIMIT_CPU, cpu, cpu + 1), (resource.RLIMIT_AS, mem, mem),
                            (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_CORE, 0, 0),
                            (resource.RLIMIT_NPROC, nproc, nproc)):
        if soft >= 0:
            resource.setrlimit(res, (soft, hard))
    os.execv(sys.argv[9], sys.argv[9:])
os.close(out)
os.close(err)
while True:
    got, wait_status = os.wait()
    if got == pid:
        break
os.write(status, b"%d" % wait_status)
"""
_TAIL = 256 << 10
_FORK_FAILED = ("BlockingIOError: [Errno 11]", "Resource temporarily unavailable",
                "Cannot fork", "can't fork")


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
    """Which limit stopped the run: 'cpu', 'memory', 'wall', 'file-size', 'processes',
    'output-files', 'output-bytes'."""
    outputs: list[Path] | None = None
    """Files found in the output directory; None would mean the runner cannot tell."""
    isolated_network: bool = False
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)
    isolation: str = "none"
    """'bwrap' or 'unshare' (the tool that made the sandbox), or 'none'."""


class CodeRunner(Protocol):
    """Runs code in a staging area under limits."""
    def run(self, code: str, stage: StagingArea, limits: Limits) -> RunOutcome:
        """Run `code` in `stage` under `limits`; returns how it ended."""


class StagingArea:
    """A private working directory with `inputs/` and `outputs/`; removed on close.

    `root` is the code's working directory; beside it in `base`, out of the code's sight, are
    the sandbox's own files and the files the code's stdout and stderr go to.
    """

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="byref-run-")
        self.base = Path(self._tmp.name)
        self.root = self.base / "work"
        self.inputs = self.root / "inputs"
        self.outputs = self.root / "outputs"
        self.inputs.mkdir(parents=True)
        self.outputs.mkdir()
        self.manifest = self.root / "inputs.json"

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

    def check(self) -> None:
        """Raise IsolationUnavailable now if runs would be refused (for a check at startup)."""
        if self.isolation == "required":
            self.sandbox.backend(self.python)

    def run(self, code: str, stage: StagingArea, limits: Limits) -> RunOutcome:
        """Run `code` in a sandboxed child process; raises `IsolationUnavailable` when it cannot
        isolate (warning once)."""
        try:
            self.check()
        except IsolationUnavailable as exc:
            if not self._warned:
                self._warned = True
                log.warning("%s", developer_message(exc.reason))
            raise
        (stage.root / "main.py").write_text(code)
        paths = [stage.base / name for name in ("stdout", "stderr", "launcher")]
        read_status, write_status = os.pipe()
        try:
            proc, isolation = self._launch(stage, limits, write_status, paths)
            try:
                stopped = self._wait(proc, limits, isolation != "none")
                status = _read_status(read_status)
            except BaseException:
                self._stop(proc, isolation != "none")  # interrupted: nothing outlives the call
                raise
        finally:
            os.close(read_status)
        stdout, stderr, launcher = (_tail(p) for p in paths)
        if status is None and stopped is None:
            # The init never reported: the sandbox itself failed; say what it said.
            stderr += launcher
        exit_code = os.waitstatus_to_exitcode(status) if status is not None else proc.returncode
        if stopped is None:
            stopped = _limit_hit(exit_code, stderr)
        outcome = RunOutcome(exit_code, stdout, stderr, stopped,
                             isolated_network=isolation != "none", workdir=stage.root,
                             isolation=isolation)
        outcome.outputs = _collect(stage.outputs, limits, outcome)
        return outcome

    def _launch(self, stage: StagingArea, limits: Limits, write_status: int,
                paths: list[Path]) -> tuple[subprocess.Popen[bytes], str]:
        """Start the init (in the sandbox, unless isolation is 'none'); closes `write_status`."""
        env = minimal_env(stage.root) | {"BYREF_INPUTS": str(stage.manifest),
                                         "BYREF_OUTPUT_DIR": str(stage.outputs)}
        # Files, not pipes: a process that keeps stdout open cannot hold the call past EOF.
        out, err, launcher_err = (os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                                  for p in paths)
        try:
            argv = [self.python, "-I", "-S", "-c", _INIT, str(write_status), str(out), str(err),
                    str(limits.cpu_seconds), str(limits.memory_bytes), str(limits.file_bytes),
                    str(limits.max_processes if self.isolation == "required" else -1), "--",
                    self.python, "-I", "-c", _BOOTSTRAP]
            isolation = "none"
            if self.isolation == "required":
                isolation = self.sandbox.backend(self.python)[0]
                argv = self.sandbox.command(
                    self.python, work=stage.root, inputs=stage.inputs,
                    writable=(stage.root, stage.outputs), private=stage.base / "sandbox",
                    inner=argv)
            proc = subprocess.Popen(argv, cwd=stage.root, env=env, stdin=subprocess.DEVNULL,
                                    stdout=launcher_err, stderr=launcher_err,
                                    pass_fds=(write_status, out, err), start_new_session=True)
        finally:
            for fd in (write_status, out, err, launcher_err):
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


def _read_status(fd: int) -> int | None:
    """The code's wait status as the init wrote it; None if the init never got that far."""
    deadline = time.monotonic() + 5
    data = b""
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return int(data) if data.isdigit() else None


def _limit_hit(exit_code: int, stderr: str) -> str | None:
    # The soft CPU limit sends SIGXCPU; code that ignores it meets the hard limit's SIGKILL.
    if exit_code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu"
    if "MemoryError" in stderr or exit_code == -signal.SIGSEGV:
        return "memory"
    if exit_code == -signal.SIGXFSZ:
        return "file-size"
    if exit_code != 0 and any(s in stderr[-2_000:] for s in _FORK_FAILED):
        return "processes"
    return None


def _tail(path: Path) -> str:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - _TAIL))
        return fh.read().decode("utf-8", errors="replace")


def _collect(directory: Path, limits: Limits, outcome: RunOutcome) -> list[Path]:
    found: list[Path] = []
    total = 0
    try:
        mode = directory.lstat().st_mode
    except FileNotFoundError:
        return found  # the code removed it: nothing to read
    if not stat.S_ISDIR(mode):
        # The code may swap its output directory for a link to the host's files: read nothing.
        outcome.notes.append("the output directory was replaced, so nothing was read back")
        return found
    for dirpath, _, files in os.walk(directory):
        for name in sorted(files):
            path = Path(dirpath) / name
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                # A symlink would be read as the host sees it; a FIFO would block the read.
                kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                outcome.notes.append(f"{name!r} is {kind} and was not read back")
                continue
            found.append(path)
            total += info.st_size
            if len(found) > limits.max_output_files:
                outcome.stopped = outcome.stopped or "output-files"
                return found[: limits.max_output_files]
            if total > limits.max_output_bytes:
                outcome.stopped = outcome.stopped or "output-bytes"
                return found[:-1]
    return found
