"""The tasks figures of `byref bench gateway`: what a poll of a running MCP task costs through
the gateway over HTTP, beside a direct call.

Owns one section: the bench upstream's echo called directly over HTTP (the baseline), the same
echo through the gateway by a client that did not declare the tasks extension and by one that
did (answered inline: the cost of the decision a task may begin), and a `tasks/get` of a task
held running by the upstream's long `wait` — each a ratio to the direct call, interleaved. The
law: one official `mcp` client a side; the task's id is read from the `CreateTaskResult` the
client's claim for `resultType: "task"` receives.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict

from byref.bench.gateway.rig import (
    TOKEN,
    UPSTREAM,
    Stage,
    announced,
    gateway_command,
    http_client,
    interleaved,
    row,
    upstream_command,
)
from byref.gateway.catalog.convert import qualified_name
from byref.gateway.upstream.modern.tasks import CreateTask, TaskGet, TaskParams

EXTENSION = "io.modelcontextprotocol/tasks"
ECHO, WAIT = qualified_name(UPSTREAM, "echo"), qualified_name(UPSTREAM, "wait")
HELD = 3600.0
"""Seconds the held task's upstream call waits (it is cancelled when the section ends)."""


class Detailed(types.Result):
    """A `tasks/get` answer, as far as the bench reads it."""

    model_config = ConfigDict(extra="allow")
    status: str


class TasksClient(ClientExtension):
    """The extension declared; a task the gateway makes is noted, not polled."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.created: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        """The claim for `resultType: "task"`."""
        return [ResultClaim(result_type="task", model=CreateTask, resolve=self._noted)]

    async def _noted(self, made: CreateTask, _ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(made.task_id)
        return types.CallToolResult(content=[types.TextContent(type="text", text=made.task_id)])


def tasks_config(config: Path) -> Path:
    """`config` with tasks that begin after 0.2 s."""
    data = json.loads(config.read_text())
    data.setdefault("byref", {})["tasks"] = {"after": 0.2}
    out = config.with_name(f"{config.stem}-tasks.json")
    out.write_text(json.dumps(data))
    return out


def _declaring(url: str, tasks: TasksClient) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                              timeout=httpx2.Timeout(30.0, read=300.0))
    return Client(streamable_http_client(url, http_client=http), cache=None, extensions=[tasks])


def _call(client: Client, name: str, args: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    async def go() -> Any:
        answer = await client.call_tool("call_tool", {"name": name, "arguments": args})
        if answer.is_error:
            raise RuntimeError(f"the bench call {name!r} failed: {answer.content!r}")
        return answer
    return go


def _poll(client: Client, task_id: str) -> Callable[[], Awaitable[Any]]:
    async def go() -> Any:
        got = await client.session.send_request(TaskGet(params=TaskParams(task_id=task_id)),
                                                Detailed)
        if got.status != "working":
            raise RuntimeError(f"the held task is {got.status!r}, not working")
        return got
    return go


async def tasks_figures(plan: Any, config: Path, tick: Callable[[float], None],
                        stage: Stage) -> dict[str, Any]:
    """The section: direct echo, the gateway's echo without and with the extension declared,
    and a poll of a running task, interleaved."""
    gateway_http = gateway_command(tasks_config(config), "--transport", "http", "--port", "0")
    tasks = TasksClient()
    async with announced(upstream_command("--http")) as upstream_url, \
            announced(gateway_http) as gateway_url, \
            http_client(upstream_url) as direct, http_client(gateway_url, TOKEN) as plain, \
            _declaring(gateway_url, tasks) as declaring:
        small = direct_echo(direct)
        await small()
        await _call(plain, ECHO, {"text": "ping"})()  # starts the upstream: not timed
        await _call(declaring, WAIT, {"seconds": HELD})()
        if len(tasks.created) != 1:
            raise RuntimeError("the gateway made no task of the bench's long call")
        held = tasks.created[0]
        sides = {"direct": small, "plain": _call(plain, ECHO, {"text": "ping"}),
                 "declared": _call(declaring, ECHO, {"text": "ping"}),
                 "poll": _poll(declaring, held)}
        async with stage.turn():
            t = await interleaved(sides, plan.calls, plan.warmup, tick)
    return {"calls": plan.calls, "call_tool": row(t["direct"], t["plain"]),
            "call_tool_declaring_tasks": row(t["direct"], t["declared"]),
            "tasks_get_poll": row(t["direct"], t["poll"])}


def direct_echo(client: Client) -> Callable[[], Awaitable[Any]]:
    """The baseline: the bench upstream's echo, called directly."""
    async def go() -> Any:
        return await client.call_tool("echo", {"text": "ping"})
    return go
