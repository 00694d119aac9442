"""A call that outlasts its client's request timeout, through the gateway over HTTP, by the
official MCP client (`mcp.Client`) declaring the tasks extension: it completes via a task, and
its 5 MB result arrives as a ref that a second call forwards byte-exact to another tool. The
same client without the extension loses the same call to its timeout. The upstream's long call
waits on a file the client creates once the call has outlasted twice the client's timeout (the
client's own polls at the task's `pollIntervalMs` pace it; the test never sleeps), bounded by
the tool's `seconds`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_tasks import TASKS, TOKEN, serving

TIMEOUT = 3.0
"""The client's request timeout (the issue's 30 s, scaled down: the call outlasts it twice)."""
SIZE = 5_000_000
BOUND = 120.0
pytestmark = pytest.mark.anyio


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    yield from serving(tmp_path)


class CreateTask(types.Result):
    """A `CreateTaskResult`, as far as this client reads it."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class TaskGetParams(types.RequestParams):
    task_id: str


class TaskGet(types.Request[TaskGetParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"


class Detailed(types.Result):
    model_config = ConfigDict(extra="allow")
    status: str
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """The tasks extension as a client uses it: a `CreateTaskResult` is polled with `tasks/get`
    at its `pollIntervalMs` until it settles; `release` is told how long the call has run."""

    identifier = TASKS

    def __init__(self, release: Any = None) -> None:
        self.release = release
        self.polls = 0
        self.created: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTask, resolve=self.resolve)]

    async def resolve(self, made: CreateTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(made.task_id)
        began = time.monotonic()
        with anyio.fail_after(BOUND):
            while True:
                got = await ctx.session.send_request(
                    TaskGet(params=TaskGetParams(task_id=made.task_id)), Detailed,
                    request_read_timeout_seconds=ctx.read_timeout_seconds)
                self.polls += 1
                if got.status == "completed" and got.result is not None:
                    return types.CallToolResult.model_validate(got.result)
                if got.status in ("failed", "cancelled"):
                    raise AssertionError(f"the task ended {got.status}: {got.error}")
                if self.release is not None:
                    self.release(time.monotonic() - began)
                await anyio.sleep((got.poll_interval_ms or 1000) / 1000)  # as the task asks


def _client(url: str, extensions: list[ClientExtension]) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {TOKEN}"})), read_timeout_seconds=TIMEOUT,
        extensions=extensions)


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_a_call_past_the_clients_timeout_completes_as_a_task_and_its_ref_forwards(
        gateway: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, *_ = gateway
    lost, released = tmp_path / "lost", tmp_path / "released"
    # Without the extension the same long call is lost to the client's timeout.
    async with _client(url, []) as plain:
        with pytest.raises(MCPError) as timed_out:
            await plain.call_tool("slow_export", {"seconds": BOUND, "size": 1000,
                                                  "until": str(lost)})
        assert "timed out" in str(timed_out.value).lower(), timed_out.value
    lost.touch()  # the lost call's upstream is let go

    outlasted: list[float] = []

    def release(elapsed: float) -> None:
        if elapsed > 2 * TIMEOUT and not released.exists():
            outlasted.append(elapsed)
            released.touch()

    tasks = Tasks(release)
    async with _client(url, [tasks]) as client:
        with anyio.fail_after(BOUND):
            placed = await client.call_tool("slow_export", {
                "seconds": BOUND, "size": SIZE, "until": str(released)})
        assert isinstance(placed, types.CallToolResult) and not placed.is_error, placed
        assert len(tasks.created) == 1 and outlasted and outlasted[0] > 2 * TIMEOUT
        shown = _text(placed)
        assert len(shown) < 40_000, len(shown)  # a preview and a ref, never the 5 MB
        ref = json.loads(shown)["value"]
        assert ref["$ref"]["type"] == "Blob", ref
        with anyio.fail_after(BOUND):
            digest = await client.call_tool("digest", {"data": ref})
    rows = [{"n": i, "text": f"row {i:08d}"} for i in range(SIZE // 32)]
    exact = json.dumps(rows).encode()
    assert len(exact) > SIZE * 0.9
    assert _text(digest).startswith(f"{len(exact)} bytes, sha256 "
                                    f"{hashlib.sha256(exact).hexdigest()}"), _text(digest)
