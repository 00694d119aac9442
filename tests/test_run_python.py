"""run_python: a 100 MB dataset by ref, a chart back with lineage, and limits that hold."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

from byref.harness import Harness, Ledger, ScriptedModel, call, last_result, say
from byref.jsonview import decode
from byref.store import FileStore
from byref.testing import result_text
from byref.tools import ToolContext, tool
from byref.tools.run_python.code import PackageInventory, make_run_python_tool
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part


def runner() -> SubprocessRunner:
    # These tests are about limits and lineage; the sandbox's own tests live in
    # test_run_python_sandbox.py. Where this host cannot make one, they run unisolated.
    unisolated = Sandbox().unavailable() is not None
    return SubprocessRunner(isolation="none" if unisolated else "required")

AGGREGATE = """
import json, os
from PIL import Image, ImageDraw
inputs = json.load(open(os.environ["BYREF_INPUTS"]))
totals = {}
with open(inputs["sales"]["path"]) as f:
    next(f)
    for line in f:
        region, amount, _ = line.split(",", 2)
        totals[region] = totals.get(region, 0) + int(amount)
img = Image.new("RGB", (400, 200), "white")
draw = ImageDraw.Draw(img)
for i, (region, total) in enumerate(sorted(totals.items())):
    draw.rectangle([20 + i * 90, 190 - total // 2_000_000, 90 + i * 90, 190], fill="steelblue")
img.save(os.path.join(os.environ["BYREF_OUTPUT_DIR"], "totals.png"))
print(json.dumps(totals, sort_keys=True))
"""

REGIONS = ("east", "north", "south", "west")


def dataset() -> tuple[bytes, dict[str, int]]:
    block_lines, totals = [], dict.fromkeys(REGIONS, 0)
    for i in range(10_000):
        region, amount = REGIONS[i % 4], (i * 37) % 1_000
        block_lines.append(f"{region},{amount},{'x' * 30}\n")
        totals[region] += amount
    block = "".join(block_lines).encode()
    repeats = 100_000_000 // len(block) + 1
    return b"region,amount,pad\n" + block * repeats, {k: v * repeats for k, v in totals.items()}


def results(h: Harness) -> list[Part]:
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"]


def test_hundred_megabytes_by_ref_to_a_chart_with_lineage(tmp_path: Path) -> None:
    data, totals = dataset()
    assert len(data) >= 100_000_000
    store = FileStore(tmp_path / "store")

    @tool
    def load_sales(ctx: ToolContext) -> dict[str, Any]:
        """Load every sale as a CSV dataset."""
        meta = ctx.artifacts.put(data, kind="dataset/csv", media_type="text/csv",
                                 label="all sales")
        return {"dataset": {"$ref": {"type": "Blob", "key": meta.ref}}, "bytes": meta.bytes}

    run_python = make_run_python_tool(runner=runner(),
                                      limits=Limits(cpu_seconds=60, wall_seconds=120))
    h = Harness(ScriptedModel([
        call("load_sales", {}),
        call("run_python", lambda r: {"code": AGGREGATE,
                                      "inputs": {"sales": last_result(r)["dataset"]}}),
        say("Chart ready."),
    ]), [load_sales, run_python], store=store)
    run = h.run_sync("Total sales per region, as a chart.")
    out = decode(result_text(results(h)[-1]))
    assert decode(out["stdout"]) == totals
    (png,) = out["files"]
    sales_ref = results(h)[0].value["dataset"]["$ref"]["key"]
    assert png["kind"] == "file/png" and png["parentRefs"] == [sales_ref]
    meta = store.head(h.scope, png["value"]["$ref"]["key"])
    assert meta is not None and meta.parent_refs == (sales_ref,)
    artifact = store.get(h.scope, meta.ref)
    assert artifact is not None and artifact.data.startswith(b"\x89PNG")
    assert meta.bytes == len(artifact.data)
    ledger = Ledger.of(run)
    assert ledger.model_read_chars + ledger.model_written_chars < 2_000


def run_code(code: str, limits: Limits, tmp_path: Path) -> Part:
    h = Harness(ScriptedModel([call("run_python", {"code": code}), say("x")]),
                [make_run_python_tool(runner=runner(), limits=limits)], store=FileStore(tmp_path))
    h.run_sync("go")
    return results(h)[-1]


def test_runaway_loop_stops_at_the_cpu_limit(tmp_path: Path) -> None:
    part = run_code("while True:\n    pass\n", Limits(cpu_seconds=1, wall_seconds=30), tmp_path)
    assert part.is_error
    assert (result_text(part)).startswith("Your program was stopped at its CPU-time limit")


def test_sleeping_forever_stops_at_the_wall_clock(tmp_path: Path) -> None:
    part = run_code("import time\ntime.sleep(3600)\n", Limits(wall_seconds=1.5), tmp_path)
    assert (result_text(part)).startswith("Your program was stopped at its wall-clock limit")


def test_memory_bomb_stops_at_the_memory_limit(tmp_path: Path) -> None:
    part = run_code("x = bytearray(10 * 1024 ** 3)\n", Limits(memory_bytes=256 << 20), tmp_path)
    assert (result_text(part)).startswith("Your program was stopped at its memory limit")


def test_file_flood_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    code = ("import os\nd = os.environ['BYREF_OUTPUT_DIR']\n"
            "for i in range(5_000):\n    open(os.path.join(d, f'{i}.txt'), 'w').write('x')\n")
    # Generous CPU and wall clocks, so the limit that answers is the file count even on a busy
    # machine; fewer files than the disk's file cap (Limits.disk_files), which would answer first.
    part = run_code(code, Limits(max_output_files=32, cpu_seconds=300, wall_seconds=300),
                    tmp_path)
    assert part.is_error
    assert (result_text(part)) == ("Your program's output went over the output file-count "
                                     "limit (32 files, 64 MB); nothing was kept. Write fewer, "
                                     "smaller files.")
    assert not list(tmp_path.rglob("*.bin"))


def test_no_network(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        part = run_code(code, Limits(wall_seconds=20), tmp_path)
    assert part.is_error
    assert re.search(r"PermissionError: network access is disabled|Network is unreachable|"
                     r"Connection refused", part.rendered or "")


def test_expired_parent_fails_that_mint(tmp_path: Path) -> None:
    store = FileStore(tmp_path)

    @tool
    def load(ctx: ToolContext) -> str:
        """Load."""
        return ctx.artifacts.put(b"1,2,3", kind="dataset/csv", media_type="text/csv").ref

    code = ("import os\nfrom pathlib import Path\n"
            "Path(os.environ['BYREF_OUTPUT_DIR'], 'out.txt').write_text('done')\n")

    class DeletingRunner:
        def __init__(self) -> None:
            self.inner = runner()

        def run(self, code: str, stage: Any, limits: Limits) -> Any:
            outcome = self.inner.run(code, stage, limits)
            for path in tmp_path.rglob("*.json"):
                path.unlink()  # the input expires while the code runs
            return outcome

    h = Harness(ScriptedModel([
        call("load", {}),
        call("run_python", lambda r: {"code": code, "inputs": {"d": last_result(r)}}),
        say("x")]), [load, make_run_python_tool(runner=DeletingRunner())], store=store)
    h.run_sync("go")
    out = decode(result_text(results(h)[-1]))
    (entry,) = out["files"]
    assert entry["stored"] is False
    assert entry["reason"].endswith("expired during the run, so its lineage cannot be proven; "
                                    "run again with a live input.")


def test_no_inputs_means_parent_refs_absent(tmp_path: Path) -> None:
    code = ("import os\nfrom pathlib import Path\n"
            "Path(os.environ['BYREF_OUTPUT_DIR'], 'a.csv').write_text('x,y')\n")
    part = run_code(code, Limits(), tmp_path)
    (entry,) = decode(result_text(part))["files"]
    assert entry["kind"] == "file/csv" and "parentRefs" not in entry


def test_description_tracks_the_package_inventory() -> None:
    now = [0.0]
    packages = [["alpha", "beta"]]
    inventory = PackageInventory(interval=60, clock=lambda: now[0], read=lambda: packages[0])
    run_python = make_run_python_tool(inventory=inventory)
    heard: list[list[str]] = []
    inventory.listeners.append(heard.append)
    assert "Installed packages: alpha, beta." in run_python.description
    packages[0] = ["alpha", "beta", "gamma"]
    assert run_python.refresh is not None
    run_python.refresh()
    assert "gamma" not in run_python.description  # not due yet
    now[0] = 61
    run_python.refresh()
    assert "Installed packages: alpha, beta, gamma." in run_python.description
    assert heard == [["alpha", "beta", "gamma"]]


def test_limits_are_refusals_not_crashes_of_the_host(tmp_path: Path) -> None:
    # After all of the above, this process is intact and can still run code normally.
    part = run_code("print('still fine')\n", Limits(), tmp_path)
    assert decode(result_text(part))["stdout"] == "still fine\n"


def test_an_inventory_change_reindexes_the_catalog() -> None:
    from byref.discovery import Catalog, Discovery

    now = [0.0]
    packages = [["alpha"]]
    inventory = PackageInventory(interval=60, clock=lambda: now[0], read=lambda: packages[0])
    run_python = make_run_python_tool(inventory=inventory)
    discovery = Discovery(Catalog([run_python]))
    assert discovery.searcher.search("zebrafishlib").results == []
    packages[0] = ["alpha", "zebrafishlib"]
    now[0] = 61
    assert run_python.refresh is not None
    run_python.refresh()
    (found,) = discovery.searcher.search("zebrafishlib").results
    assert found.name == "run_python"
