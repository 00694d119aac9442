"""What one run is given and what it gives back: its limits, its staging area, its outcome.

Owns `Limits` (the budgets of one run), `StagingArea` (the private directory a run's sandbox is
built over: its work directory, inputs, seed and collected outputs), `StagedInput`, `RunOutcome`
and the `CodeRunner` port the tools run code through. Plain data: the runner
(`run_python.runner`) and one sandbox's start-to-report life (`run_python.launch`) use it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


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
