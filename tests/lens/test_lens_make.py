"""`make demo` tells the newcomer how to look at the run it just made."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from _waits import scaled
from byref.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_make_demo_prints_the_lens_command_for_its_own_run() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                         timeout=scaled(60), check=True).stdout
    demo_line = next(line for line in dry.splitlines() if line.endswith("byref demo"))
    lens_line = next(line for line in dry.splitlines() if "byref lens" in line)
    assert dry.splitlines().index(lens_line) > dry.splitlines().index(demo_line)
    out_dir = build_parser().parse_args(["demo"]).out  # where that `byref demo` writes
    assert lens_line.rstrip("\"'").endswith(f"byref lens {out_dir}")
    assert build_parser().parse_args(["lens", str(out_dir)]).path == out_dir


def test_byref_lens_on_a_path_that_is_not_a_run_says_what_to_pass(tmp_path: Path) -> None:
    from _lens_rig import BYREF

    done = subprocess.run([*BYREF, "lens", str(tmp_path)], capture_output=True, text=True,
                          timeout=scaled(60))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"byref lens: {str(tmp_path)!r} has no transcript.jsonl. Pass a run "
                           "directory, as `byref demo --out DIR` writes it. Or pass a gateway's "
                           "store: byref lens --store URL [--conversation ID].\n")
