"""MCP tasks across replicas: three `byref gateway --transport http` processes behind a real HAProxy
(round robin, no stickiness) on shared PostgreSQL state and one file store. A task made through the
balancer is polled through each replica by its own address and completes, its large result a ref; a
question one replica's task asks is answered through another; the replica running a task is
SIGKILLed and the task reads `failed`, saying why, through the survivors within a bound; every
replica restarts and the completed task, and its ref forwarded to another tool, still resolve.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_gateway_replicas import _haproxy, replicas

from _waits import scaled

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_conformance import SERVER
from test_gateway_tasks import TOKEN, _rpc

SIZE = 400_000
FAILED_WITHIN = 30.0
"""Seconds within which a killed replica's task must read `failed` on a survivor."""


def _until(url: str, task_id: str, statuses: tuple[str, ...], within: float
           ) -> tuple[dict[str, Any], float]:
    """Poll `url` at the task's own pace until its status is one of `statuses`: (the task,
    seconds it took); bounded by `within`."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        got = _rpc(url, "tasks/get", {"taskId": task_id})
        assert "result" in got, got
        if got["result"]["status"] in statuses:
            return got["result"], time.monotonic() - began
        time.sleep(got["result"]["pollIntervalMs"] / 1000)  # the poll interval the task asks for
    raise AssertionError(f"task {task_id!r} not {statuses} within {within} s at {url}")


def _ready(front: str, ports: list[int]) -> None:
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        try:
            codes = [httpx.get(f"http://127.0.0.1:{p}/readyz", timeout=5).status_code
                     for p in ports] + [httpx.get(f"{front}/healthz", timeout=5).status_code]
            # A cold replica's first call may name a tool of a server still starting.
            if codes == [200] * (len(ports) + 1) and all("Hello" in json.dumps(_rpc(
                    f"http://127.0.0.1:{p}/mcp", "tools/call", {
                        "name": "greet", "arguments": {"name": "up"}}, tasks=False))
                    for p in ports):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the replicas never became ready")


def test_tasks_across_replicas_survive_a_kill_and_a_restart(
        tmp_path: Path, postgres_state: str) -> None:
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (apt-get install -y haproxy; scripts/services.sh)")
    config = tmp_path / "replicas.json"
    config.write_text(json.dumps({
        "mcpServers": {"conformance": {"command": sys.executable, "args": [str(SERVER)]}},
        "byref": {"tokens": {TOKEN: {"tenant": "local", "principal": "me"}}, "replicas": True,
                  "state": postgres_state, "store": f"file://{tmp_path / 'store'}",
                  "tasks": {"after": 0.5, "pollIntervalMs": 200}}}))
    held = tmp_path / "never-released"
    outcome: dict[str, Any] = {}
    with (tmp_path / "replicas.log").open("a") as log:
        with replicas(config, log, 3) as (procs, ports):
            haproxy, front_port = _haproxy(tmp_path, ports)
            front = f"http://127.0.0.1:{front_port}"
            try:
                _ready(front, ports)
                made = _rpc(f"{front}/mcp", "tools/call", {"name": "slow_export", "arguments": {
                    "seconds": 2, "size": SIZE}})["result"]
                assert made["resultType"] == "task", made
                task = made["taskId"]
                seen = {p: _rpc(f"http://127.0.0.1:{p}/mcp", "tasks/get", {"taskId": task})[
                    "result"]["status"] for p in ports}
                assert set(seen.values()) <= {"working", "completed"}, seen
                done, _ = _until(f"{front}/mcp", task, ("completed", "failed"), scaled(60))
                assert done["status"] == "completed", done
                for p in ports:  # the same result on every replica
                    got = _rpc(f"http://127.0.0.1:{p}/mcp", "tasks/get", {"taskId": task})
                    assert got["result"]["result"] == done["result"], p
                placed = json.loads(done["result"]["content"][0]["text"])
                ref = placed["value"]
                assert ref["$ref"]["type"] == "Blob", placed

                # A question mid-task, answered through another replica than the runner's.
                runner, other = (f"http://127.0.0.1:{p}/mcp" for p in ports[1:])
                asking = _rpc(runner, "tools/call", {"name": "confirm_delete", "arguments": {
                    "filename": "x.txt"}}, asks=True)["result"]
                assert asking["resultType"] == "task", asking
                asked, _ = _until(other, asking["taskId"], ("input_required", "failed"),
                                  scaled(30))
                assert asked["status"] == "input_required", asked
                [key] = asked["inputRequests"]
                _rpc(other, "tasks/update", {"taskId": asking["taskId"], "inputResponses": {
                    key: {"action": "accept", "content": {"confirm": True}}}})
                deleted, _ = _until(other, asking["taskId"], ("completed", "failed"), scaled(30))
                assert "Deleted x.txt." in deleted["result"]["content"][0]["text"], deleted

                # The replica running a task is killed: a survivor says the task failed.
                victim = f"http://127.0.0.1:{ports[0]}/mcp"
                doomed = _rpc(victim, "tools/call", {"name": "slow_export", "arguments": {
                    "seconds": 600, "size": 10, "until": str(held)}})["result"]
                assert doomed["resultType"] == "task", doomed
                procs[0].send_signal(signal.SIGKILL)
                procs[0].wait(scaled(10))
                failed, took = _until(f"http://127.0.0.1:{ports[1]}/mcp", doomed["taskId"],
                                      ("failed", "completed", "cancelled"),
                                      scaled(FAILED_WITHIN))
                assert failed["status"] == "failed" and "result" not in failed, failed
                assert "stopped before it finished" in failed["error"]["message"], failed
                again = _rpc(f"http://127.0.0.1:{ports[2]}/mcp", "tasks/get",
                             {"taskId": doomed["taskId"]})["result"]
                assert again["status"] == "failed", again
                outcome["failed_after_s"] = round(took, 2)
            finally:
                haproxy.kill()
                haproxy.wait(10)
        # Every replica restarts: the completed task and its ref still resolve.
        with replicas(config, log, 3) as (_, ports):
            haproxy, front_port = _haproxy(tmp_path, ports)
            front = f"http://127.0.0.1:{front_port}"
            try:
                _ready(front, ports)
                after = _rpc(f"{front}/mcp", "tasks/get", {"taskId": task})["result"]
                assert after["status"] == "completed" and after["result"] == done["result"]
                digest = _rpc(f"{front}/mcp", "tools/call", {"name": "digest", "arguments": {
                    "data": ref}}, tasks=False)["result"]
            finally:
                haproxy.kill()
                haproxy.wait(10)
    rows = [{"n": i, "text": f"row {i:08d}"} for i in range(SIZE // 32)]
    exact = json.dumps(rows).encode()
    said = digest["content"][0]["text"]
    assert said.startswith(f"{len(exact)} bytes, sha256 {hashlib.sha256(exact).hexdigest()}"), \
        said
    print(f"replica tasks: completed across 3 replicas; the killed replica's task read failed "
          f"on a survivor after {outcome['failed_after_s']} s; after a restart of all three the "
          "completed task and its ref resolved (byte-exact)")
