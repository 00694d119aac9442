"""`byref bench context`: what the byref round trip costs as the export grows.

Each size runs in a fresh child process so its peak RSS is its own; an idle child (imports only)
is the baseline every RSS figure is compared with, and the smallest size is the baseline for
model-visible characters and wall time. Figures are ratios measured in the same run.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from byref.demo.data import write_export


def child_round_trip(export: Path, out: Path) -> dict[str, Any]:
    """Run in the child: the byref round trip only (the export already exists)."""
    from byref.demo.data import open_rows
    from byref.demo.scenario import run_byref
    from byref.jsonview import encode

    started = time.perf_counter()
    figures, requests, delivered = run_byref(export, out)
    wall = time.perf_counter() - started
    visible = sum(len(r.all_text()) for r in requests[-1:])
    rows_bytes = len(encode(delivered.rows))
    identical = encode(delivered.rows) == encode(open_rows(export))
    from byref.harness.tokens import count_tokens, default_counter

    return {"wall_s": wall, "model_read_chars": figures["model_read_chars"],
            "model_read_tokens": figures["model_read_tokens"],
            "model_visible_chars": visible,
            "model_visible_tokens": count_tokens(requests[-1].all_text()),
            "tokenizer": default_counter().name, "rows": figures["rows_delivered"],
            "rows_bytes": rows_bytes, "rows_identical": identical}


def _spawn(args: list[str]) -> tuple[dict[str, Any], int]:
    """Run a child; return its JSON answer and its peak RSS in KiB (from wait4, not sampling)."""
    proc = subprocess.Popen([sys.executable, "-m", "byref.bench.library.demo", *args],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child {args!r} failed with exit code {proc.returncode}")
    return json.loads(output), int(usage.ru_maxrss)


def context_bench(
    sizes: list[int], *, open_items: int | None = None, workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """For each export size, run the demo's byref round trip in a child process and report
    model-visible characters, wall time and peak RSS, each with its ratio to the smallest size."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        _, idle_kib = _spawn(["--idle"])
        rows: list[dict[str, Any]] = []
        for size in sizes:
            if progress:
                progress(f"export {size:,} bytes")
            export = root / f"export-{size}.json"
            info = write_export(export, size, open_items=open_items)
            if progress:
                progress(f"round trip {size:,} bytes")
            answer, rss_kib = _spawn(["--child", str(export), str(root / f"out-{size}")])
            answer.update(size=size, export_bytes=info.bytes, peak_rss_mib=round(rss_kib / 1024, 1),
                          rss_over_idle_mib=round((rss_kib - idle_kib) / 1024, 1))
            export.unlink()
            rows.append(answer)
    base = rows[0]
    for row in rows:
        row["visible_vs_smallest"] = round(row["model_visible_chars"] / base["model_visible_chars"],
                                           3)
        row["wall_vs_smallest"] = round(row["wall_s"] / base["wall_s"], 2)
        row["rss_over_idle_vs_smallest"] = round(
            row["rss_over_idle_mib"] / max(0.1, base["rss_over_idle_mib"]), 2)
        row["export_vs_smallest"] = round(row["export_bytes"] / base["export_bytes"], 1)
        row["wall_s"] = round(row["wall_s"], 3)
    visible = [r["model_visible_chars"] for r in rows]
    spread = (max(visible) - min(visible)) / (sum(visible) / len(visible))
    return {"idle_rss_mib": round(idle_kib / 1024, 1), "sizes": rows,
            "open_items": "scaled with size" if open_items is None else open_items,
            "visible_spread": round(spread, 4)}


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--idle"]:
        # Pay what every round trip pays regardless of size: imports, the PDF library, the BPE
        # ranks for token counts. What a size adds on top of this is the figure that matters.
        import reportlab.platypus  # noqa: F401

        import byref.demo.scenario  # noqa: F401
        from byref.harness.tokens import count_tokens

        count_tokens("warm up")
        print("{}")
        return 0
    if argv[:1] == ["--child"]:
        print(json.dumps(child_round_trip(Path(argv[1]), Path(argv[2]))))
        return 0
    print("usage: python -m byref.bench.library.demo --idle | --child EXPORT OUT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(_main(sys.argv[1:]))
