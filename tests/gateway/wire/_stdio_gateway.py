"""A `byref gateway` run as a subprocess over stdio, its answers read on a thread (imported as
`_stdio_gateway` by the stdio tests)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any


class Gateway:
    """A `byref gateway` over stdio, its answers read on a thread (every wait bounded)."""

    def __init__(self, config: Path, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config),
             "--store", f"file://{root / 'store'}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def until(self, rid: str, also: Counter[Any] | None = None) -> list[dict[str, Any]]:
        """Answers until the one to `rid` and as many as `also` counts per id have come (a
        well-formed request may be answered after a later ping); 60 s at most each."""
        got: list[dict[str, Any]] = []
        waiting = Counter(also or {})
        done = False
        while not done or +waiting:
            answer = self.answers.get(timeout=60)
            assert answer is not None, f"the gateway exited before answering {rid!r}: {got[-3:]}"
            got.append(answer)
            waiting[answer.get("id")] -= 1
            done = done or answer.get("id") == rid
        return got

    def close(self) -> list[dict[str, Any]]:
        """End input; the answers that came after the last one read."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        rest: list[dict[str, Any]] = []
        while (answer := self.answers.get(timeout=30)) is not None:
            rest.append(answer)
        return rest
