"""MCP tasks (`io.modelcontextprotocol/tasks`) toward a 2026-07-28 upstream: the gateway declares
the extension to it, and a call it answers with a task is driven to completion.

Owns `UpstreamTasks`, the client extension every upstream connection carries: its claim on
`resultType: "task"` polls the upstream's `tasks/get` at the task's own `pollIntervalMs` (never
faster than `MIN_POLL`) until the task settles, and answers the call with the task's result —
so whoever called (a handshake-era client, a client that did not declare tasks, or the
gateway's own task for one that did, `edge.tasks`) sees an ordinary call. The law: a completed
task is its `CallToolResult`; a failed one is its JSON-RPC error (an `MCPError`, so the call
fails as a protocol error); the call's timeout (the server's `timeout`) bounds each poll, not
the task — every answered poll moves the call's deadline on (`BOUND`); a call given up on
(cancelled, timed out) cancels the upstream's task, best effort within `CANCEL_WITHIN`.
Handshake-era upstreams are never offered it (the claim is active for 2026-07-28 only).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

EXTENSION = "io.modelcontextprotocol/tasks"
MIN_POLL = 0.05
"""Seconds: the shortest wait between two polls, whatever the task asks."""
DEFAULT_POLL = 1.0
"""Seconds between polls of a task that names no `pollIntervalMs`."""
CANCEL_WITHIN = 5.0
"""Seconds a call given up on waits for the upstream to acknowledge cancelling its task."""
BOUND: contextvars.ContextVar[tuple[anyio.CancelScope, float]] = contextvars.ContextVar(
    "byref_upstream_bound")
"""The running upstream call's bound (its cancel scope, its timeout), set by `bounds`."""


class CreateTask(types.Result):
    """An upstream's `CreateTaskResult`, as far as the gateway reads it."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str


class TaskGet(types.Request[TaskParams, Literal["tasks/get"]]):
    """`tasks/get`."""

    method: Literal["tasks/get"] = "tasks/get"


class TaskCancel(types.Request[TaskParams, Literal["tasks/cancel"]]):
    """`tasks/cancel`."""

    method: Literal["tasks/cancel"] = "tasks/cancel"


class Detailed(types.Result):
    """An upstream's `tasks/get` answer, as far as the gateway reads it."""

    model_config = ConfigDict(extra="allow")
    status: str
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class UpstreamTasks(ClientExtension):
    """The extension as the gateway's upstream connections declare it."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.driven = 0
        """Upstream tasks this connection drove (for tests)."""

    def claims(self) -> list[ResultClaim[Any]]:
        """The claim on `resultType: "task"`, at 2026-07-28 only."""
        return [ResultClaim(result_type="task", model=CreateTask, resolve=self.drive,
                            protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS))]

    async def drive(self, made: CreateTask, ctx: ClaimContext) -> types.CallToolResult:
        """Poll the upstream's task until it settles: its result, or its error raised."""
        self.driven += 1
        params = TaskParams(task_id=made.task_id)
        wait = made.poll_interval_ms
        settled = False
        try:
            while True:
                got = await ctx.session.send_request(
                    TaskGet(params=params), Detailed,
                    request_read_timeout_seconds=ctx.read_timeout_seconds)
                if got.status == "completed" and got.result is not None:
                    settled = True
                    return types.CallToolResult.model_validate(got.result, by_name=False)
                if got.status in ("failed", "cancelled"):
                    settled = True
                    error = got.error or {}
                    raise MCPError(int(error.get("code", types.INTERNAL_ERROR)), str(
                        error.get("message") or f"The server's task for {ctx.tool_name!r} "
                        f"ended {got.status}."), error.get("data"))
                bound = BOUND.get(None)
                if bound is not None:  # the server answered: its call lives on a timeout more
                    scope, timeout = bound
                    scope.deadline = max(scope.deadline, anyio.current_time() + timeout)
                wait = got.poll_interval_ms or wait
                await anyio.sleep(max(MIN_POLL, wait / 1000 if wait else DEFAULT_POLL))
        finally:
            if not settled:  # given up on: the upstream's task is not left running
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WITHIN), \
                        contextlib.suppress(Exception):
                    await ctx.session.send_request(TaskCancel(params=params), types.EmptyResult)
