"""The code runner port and its real implementation: a limited subprocess.

The law: code runs in its own working directory, in a separate process with CPU-time, memory,
file-size and wall-clock limits and no network; inputs arrive as staged files named by a JSON
manifest (`BYREF_INPUTS`); outputs are only what lands in the declared directory
(`BYREF_OUTPUT_DIR`), read back with bounded size and count. Hitting a limit stops the run and
says which limit, never the machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000

# Runs before the user's code: an audit hook refuses every socket, so even where the kernel will
# not give us a network namespace, the code cannot reach the network through Python.
_BOOTSTRAP = """
import runpy, sys
def _no_network(event, args):
    if event.startswith("socket.") and event not in ("socket.gethostname",):
        raise PermissionError("network access is disabled in run_python")
sys.addaudithook(_no_network)
sys.argv = ["main.py"]
runpy.run_path("main.py", run_name="__main__")
"""


@dataclass(frozen=True, slots=True)
class Limits:
    cpu_seconds: int = 20
    memory_bytes: int = 1 << 30
    wall_seconds: float = 60.0
    file_bytes: int = 256 << 20
    max_output_files: int = 32
    max_output_bytes: int = 64 << 20
    max_stdout_chars: int = 4_000


@dataclass(frozen=True, slots=True)
class StagedInput:
    name: str
    path: Path
    media_type: str
    bytes: int
    ref: str | None = None
    kind: str | None = None


@dataclass
class RunOutcome:
    exit_code: int
    stdout: str
    stderr: str
    stopped: str | None = None
    """Which limit stopped the run: 'cpu', 'memory', 'wall', 'output-files', 'output-bytes'."""
    outputs: list[Path] | None = None
    """Files found in the output directory; None would mean the runner cannot tell."""
    isolated_network: bool = False
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)


class CodeRunner(Protocol):
    def run(self, code: str, stage: StagingArea, limits: Limits) -> RunOutcome: ...


class StagingArea:
    """A private working directory with `inputs/` and `outputs/`; removed on close."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="byref-run-")
        self.root = Path(self._tmp.name)
        self.inputs = self.root / "inputs"
        self.outputs = self.root / "outputs"
        self.inputs.mkdir()
        self.outputs.mkdir()
        self.manifest = self.root / "inputs.json"

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> StagingArea:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SubprocessRunner:
    """Runs Python in a child process of this interpreter, under rlimits, with no network."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    def run(self, code: str, stage: StagingArea, limits: Limits) -> RunOutcome:
        (stage.root / "main.py").write_text(code)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(stage.root),
            "BYREF_INPUTS": str(stage.manifest),
            "BYREF_OUTPUT_DIR": str(stage.outputs),
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        netns = _can_unshare_network()
        proc = subprocess.Popen(
            [self.python, "-I", "-c", _BOOTSTRAP], cwd=stage.root, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            preexec_fn=lambda: _limit_child(limits, netns), start_new_session=False,
        )
        stopped = None
        try:
            out, err = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            stopped = "wall"
        code_ = proc.returncode
        stderr = err.decode("utf-8", errors="replace")
        if stopped is None:
            # The soft CPU limit sends SIGXCPU; code that ignores it meets the hard limit's SIGKILL.
            if code_ in (-signal.SIGXCPU, -signal.SIGKILL):
                stopped = "cpu"
            elif "MemoryError" in stderr or code_ == -signal.SIGSEGV:
                stopped = "memory"
            elif code_ == -signal.SIGXFSZ:
                stopped = "file-size"
        outcome = RunOutcome(code_, out.decode("utf-8", errors="replace"), stderr, stopped,
                             isolated_network=netns, workdir=stage.root)
        outcome.outputs = _collect(stage.outputs, limits, outcome)
        return outcome


def _limit_child(limits: Limits, netns: bool) -> None:
    os.setsid()  # its own process group, so a timeout kills everything it started
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if netns:
        _unshare_network()


def _unshare_network() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNET if os.geteuid() == 0 else (_CLONE_NEWUSER | _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")


def _can_unshare_network() -> bool:
    """Probe once per process in a throwaway child: can we give code an empty network?"""
    global _NETNS
    if _NETNS is None:
        if not sys.platform.startswith("linux"):
            _NETNS = False
        else:
            probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=_unshare_network,
                                   capture_output=True, check=False)
            _NETNS = probe.returncode == 0
    return _NETNS


_NETNS: bool | None = None


def _collect(directory: Path, limits: Limits, outcome: RunOutcome) -> list[Path]:
    found: list[Path] = []
    total = 0
    for dirpath, _, files in os.walk(directory):
        for name in sorted(files):
            path = Path(dirpath) / name
            if path.is_symlink():
                outcome.notes.append(f"{name!r} is a symlink and was not read back")
                continue
            found.append(path)
            total += path.stat().st_size
            if len(found) > limits.max_output_files:
                outcome.stopped = outcome.stopped or "output-files"
                return found[: limits.max_output_files]
            if total > limits.max_output_bytes:
                outcome.stopped = outcome.stopped or "output-bytes"
                return found[:-1]
    return found
