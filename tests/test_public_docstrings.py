"""Every public symbol of the library has a docstring (ruff's D1 rules), so `help()` and editors
show what each name is for. The packages still being written are listed in `PENDING` (and in
pyproject's per-file-ignores); a name leaves the list when its package is done."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _waits import scaled

SRC = Path(__file__).resolve().parents[1] / "src" / "byref"
PENDING: list[str] = []


def test_public_symbols_have_docstrings() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    done = subprocess.run(
        [ruff, "check", "--isolated", "--select", "D100,D101,D102,D103,D104",
         "--output-format", "concise",
         *(f"--extend-exclude={SRC / p}" for p in PENDING), str(SRC)],
        capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stdout + done.stderr
