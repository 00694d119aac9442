"""Memory that comes back: an HTTP gateway with the memory store, read many times for a 2.2 MB
file over one session that then closes, grows by what the store must hold plus a fixed slack —
the transcript records each placed result's substitute, never its bytes again; no upstream result
is kept; the closed session's connection is forgotten."""

from __future__ import annotations

import json
import subprocess
import sys

from _gateway_rig import FIXTURES, World

from _waits import scaled

READS = 12
SIZE = 2_200_000


def test_reads_over_a_closed_session_cost_only_what_the_store_holds(world: World) -> None:
    server = world.need("filesystem")["filesystem"]
    rows = [{"id": i, "name": f"row {i}", "price": 1.50, "tags": ["a", "b"]} for i in range(25_000)]
    path = world.files / "big.json"
    path.write_text(json.dumps(rows, indent=2)[:SIZE])
    with world.log.open("a") as errlog:
        done = subprocess.run(
            [sys.executable, str(FIXTURES / "memory_probe.py"), json.dumps(server), str(path),
             str(READS)], stdout=subprocess.PIPE, stderr=errlog, text=True, timeout=scaled(300),
            stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, world.log.read_text()[-3_000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["artifacts"] == READS + 1  # one placed result per read, warm-up included
    assert abs(got["stored"] - (READS + 1) * SIZE / 2**20) < 0.1
    assert got["largest_result_part"] < 10_000  # the substitute, not a copy of the bytes
    assert got["upstream_results_alive"] <= 1
    assert got["connections"] == 0
    # The store holds READS new copies; everything else the process keeps is bounded and fixed
    # (one message's buffers in the SDK, allocator slack), not proportional to the reads.
    must_hold = READS * SIZE / 2**20
    growth = got["after"] - got["before"]
    assert growth < 1.25 * must_hold + 24, got
