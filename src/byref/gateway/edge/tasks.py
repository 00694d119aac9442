"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) at the gateway's edge: a long
call becomes a task its client polls.

Owns `Tasks`: which calls become tasks, their runs, and `tasks/get`, `tasks/update`,
`tasks/cancel`. The law: only a 2026-07-28 request whose own client capabilities declare the
extension is ever answered `CreateTaskResult`; such a call that has not finished within
`byref.tasks.after` seconds becomes a task and runs on, one that finishes in time is answered
inline, as any call. A task is durable before it is answered (its record is in the conversation
state, `byref.conversations.tasks`, so `tasks/get` resolves on any replica sharing it); its id is
unguessable and bound to its owner (tenant, principal, grant): another owner's id reads as
absent (-32602), as a ref does. A completed task's result is the call's own answer, placed as any
call's (a large one is a preview and a ref); an upstream's protocol error (not its tool error)
leaves it `failed` with that error (`TaskFailed`). An upstream that asks its client mid-task
leaves it `input_required` with the open questions (`inputRequests`, from the parked call,
`modern.inputs`); `tasks/update` through any process answers them (partial answers kept,
unknown keys ignored) and it runs on; questions asked before a task exists are answered
`InputRequiredResult` inline. A tool its server lists `taskSupport: required` is refused -32021
to a 2026-07-28 request that did not declare the extension. A running record whose process died
reads `failed`, saying so: its process beats every `BEAT` s, and a record not beaten for `STALE`
s (or whose process on this host is gone) is failed on read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from byref.conversations.tasks import RUNNING, TaskRecord, TaskRecords
from byref.errors import OperatorError
from byref.events import Emitter
from byref.gateway.access.state import ScopeState
from byref.gateway.upstream.modern.inputs import Parking

EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_CAPABILITY = -32021
"""SEP-2575's Missing Required Client Capability."""
HEADER_MISMATCH = -32020
"""SEP-2243's HeaderMismatch."""
BEAT = 2.0
"""Seconds between a process's beats on the tasks it runs."""
STALE = 15.0
"""Seconds without a beat after which a running task's process is taken for dead."""
INPUT_POLL = 1.0
"""Seconds between a waiting task's looks for answers given through another process."""


class TaskFailed(OperatorError):
    """A call that failed as a protocol error (its upstream's error, not a tool error): inline,
    `result` (the tool error any call answers); as a task, `failed` with `error`."""

    def __init__(self, result: BaseModel, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.result, self.error = result, error


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str


class UpdateParams(TaskParams):
    """`tasks/update` params."""

    input_responses: dict[str, Any] | None = None


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request is a 2026-07-28 one whose client capabilities declare the
    extension (its own `_meta`: a declaration is per request)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and bool(caps.extensions) and EXTENSION in (caps.extensions or {})


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MCPError):
        return exc.error.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"code": types.INTERNAL_ERROR, "message": (
        f"byref gateway: the call failed ({type(exc).__name__}); its server's words are in the "
        "gateway's log.")}


def _alive(runner: str) -> bool | None:
    """Whether the process `runner` names is alive: known on its own host only (None
    elsewhere)."""
    host, _, rest = runner.partition(":")
    pid, _, _token = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Tasks:
    """This process's side of the tasks extension: its runs, and the three methods."""

    def __init__(self, records: Callable[[], TaskRecords], owner: Callable[
            [ServerRequestContext[Any, Any]], ScopeState], *, after: float, ttl_ms: int,
                 poll_ms: int, parking: Parking | None = None,
                 emit: Emitter | None = None) -> None:
        self._records = records
        self._emit = emit
        self._owner = owner
        self._parking = parking
        self._woken: dict[str, anyio.Event] = {}
        self.after, self.ttl_ms, self.poll_ms = after, ttl_ms, poll_ms
        self.runner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        self._runs: dict[str, anyio.CancelScope] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self.counts = dict.fromkeys(("created", "completed", "failed", "cancelled"), 0)
        """Tasks this process created, and settled by status (as its `task` events say)."""
        self._about: dict[str, tuple[str, str, float]] = {}
        """(owner, tool, created at) of the tasks this process tells of."""

    @property
    def running_here(self) -> int:
        """Tasks running in this process now."""
        return len(self._runs)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The server's lifespan: task runs and the beat live as long as it serves."""
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._beat)
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    def _told(self, task_id: str, status: str, *, error: str | None = None) -> None:
        """Count a task's change of status and put it in the event trace."""
        if status in self.counts:
            self.counts[status] += 1
        if self._emit is None:
            return
        owner, tool, created = self._about.get(task_id, ("", "", time.time()))
        extra: dict[str, Any] = {} if error is None else {"error": error[:300]}
        self._emit("task", task=task_id[:8], status=status, scope=owner, tool=tool,
                   seconds=round(time.time() - created, 3), **extra)

    async def _state(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kw))

    async def _beat(self) -> None:
        while True:
            await anyio.sleep(BEAT)
            if not self._runs:
                continue
            with contextlib.suppress(Exception):  # a state outage: the next beat tries again
                for gone in await self._state(self._records().beat, self.runner):
                    scope = self._runs.get(gone)
                    if scope is not None:  # cancelled through another replica
                        scope.cancel()

    # -- a call ----------------------------------------------------------------------------
    async def call(self, ctx: ServerRequestContext[Any, Any],
                   answer: Callable[[], Awaitable[BaseModel]], *, tool: str = "") -> Any:
        """The call's answer if it comes within `after` s, else a `CreateTaskResult` for the
        task it runs on as (`tool`: the name called, for the event trace)."""
        if self._group is None:
            raise MCPError(types.INTERNAL_ERROR, "The gateway is not serving (no lifespan).")
        state = self._owner(ctx)
        owner = state.store_scope.key()
        done = anyio.Event()
        box: dict[str, Any] = {}
        cancel = anyio.CancelScope()

        async def run() -> None:
            with cancel:
                try:
                    box["result"] = await answer()
                except Exception as exc:  # the task's failure, or the inline answer's
                    box["error"] = exc
            done.set()
            if "task" in box:
                await self._settle(box, state)

        self._group.start_soon(run)
        with anyio.move_on_after(self.after):
            await done.wait()
        if done.is_set():
            error = box.get("error")
            if isinstance(error, TaskFailed):
                return error.result  # answered inline: a tool error, as any call's
            if error is not None:
                raise error
            return box.get("result")
        now = time.time()
        record = TaskRecord(secrets.token_urlsafe(24), owner, "working", now, now, self.ttl_ms,
                            self.poll_ms, self.runner, now)
        self._runs[record.task_id] = cancel  # before its record: running here, never lost
        try:
            await self._state(self._records().create, record)  # durable before it is answered
        except BaseException:
            self._runs.pop(record.task_id, None)
            cancel.cancel()  # no task to run as: its client is told the state's failure
            raise
        self._about[record.task_id] = (owner, tool, now)
        self._told(record.task_id, "created")
        box["task"] = record.task_id
        if done.is_set():  # it finished while the record was written
            self._group.start_soon(self._settle, box, state)
        return {"resultType": "task", **self._envelope(record)}

    async def _settle(self, box: dict[str, Any], owner: ScopeState) -> None:
        task_id = box.pop("task")
        try:
            await self._settled(task_id, box, owner)
        finally:
            # Only once its record is final: a running record not in `_runs` reads as lost.
            self._runs.pop(task_id, None)
            self._about.pop(task_id, None)

    async def _settled(self, task_id: str, box: dict[str, Any], owner: ScopeState) -> None:
        records = self._records()
        result, error = box.get("result"), box.get("error")
        if isinstance(result, types.InputRequiredResult):  # its upstream asks mid-task
            with anyio.CancelScope() as scope:
                self._runs[task_id] = scope
                try:
                    result = await self._inputs(task_id, result, owner)
                except Exception as exc:
                    result, error = None, exc
            if scope.cancelled_caught:
                return  # cancelled: its record already says so
        if isinstance(result, types.CallToolResult):
            wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            status, said = "completed", {"result": json.dumps(wire)}
        elif error is not None:
            failure = error.error if isinstance(error, TaskFailed) else _error(error)
            status, said = "failed", {"error": json.dumps(failure), "message": "The call failed."}
        elif result is not None:  # a question, with no parked call to follow it
            status, said = "failed", {"error": json.dumps({
                "code": MISSING_CAPABILITY, "message": (
                    "byref gateway: the tool asked its client a question this gateway could not "
                    "put in the task. Call it again.")})}
        else:
            return  # cancelled: its record already says so
        if await self._state(functools.partial(records.finish, task_id, status, **said)):
            self._told(task_id, status, error=json.loads(said["error"]).get("message")
                       if "error" in said else None)

    async def _inputs(self, task_id: str, asked: types.InputRequiredResult,
                      owner: ScopeState) -> Any:
        """Follow a call whose upstream asks its client mid-task: the record is
        `input_required` with the open questions until `tasks/update` (through any process)
        answers them all, then `working` until the result or the next questions."""
        parked = None if self._parking is None else self._parking.parked(
            asked.request_state, owner)
        if parked is None or self._parking is None:
            return asked
        records = self._records()
        self._woken[task_id] = anyio.Event()
        try:
            while True:
                if parked.pending:
                    wire = types.InputRequiredResult(input_requests=parked.pending).model_dump(
                        mode="json", by_alias=True, exclude_none=True)["inputRequests"]
                    await self._state(records.ask, task_id, json.dumps(wire))
                    self._told(task_id, "input_required")
                    while parked.pending:
                        # Woken by an update here; an update through another process is
                        # seen within `INPUT_POLL` s.
                        with anyio.move_on_after(INPUT_POLL):
                            await self._woken[task_id].wait()
                        self._woken[task_id] = anyio.Event()
                        taken = await self._state(records.take, task_id)
                        if taken:
                            parked.answer(taken)
                    await self._state(records.ask, task_id, None)
                    self._told(task_id, "working")
                said = await self._parking.follow(parked)
                if not isinstance(said, types.InputRequiredResult):
                    return said
        finally:
            self._woken.pop(task_id, None)
            if parked.done_at is None:
                self._parking.abandon(parked)  # cancelled: its upstream stops waiting

    # -- the methods -----------------------------------------------------------------------
    def _declared(self, ctx: ServerRequestContext[Any, Any], method: str) -> None:
        if not declares_tasks(ctx):
            raise MCPError(MISSING_CAPABILITY, (
                f"{method} needs the {EXTENSION} extension declared in this request's "
                "io.modelcontextprotocol/clientCapabilities."), data={
                "requiredCapabilities": {"extensions": {EXTENSION: {}}}})

    async def _find(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        named = ctx.request.headers.get("mcp-name") if ctx.request is not None else None
        if named is not None and named != task_id:  # SEP-2243's routing header, SEP-2663's rule
            raise MCPError(HEADER_MISMATCH, (
                f"The Mcp-Name header ({named[:80]!r}) does not name this request's taskId "
                f"({task_id[:80]!r}); send the same id in both."))
        owner = self._owner(ctx).store_scope.key()
        records = self._records()
        found: TaskRecord | None = await self._state(records.get, task_id, owner)
        if found is None:
            raise MCPError(types.INVALID_PARAMS, (
                f"No task {task_id[:80]!r} here: it never existed, expired, or is not yours."))
        if found.status in RUNNING and found.task_id not in self._runs and self._dead(found):
            if await self._state(records.finish, found.task_id, "failed", error=json.dumps({
                    "code": types.INTERNAL_ERROR, "message": (
                        "byref gateway: the gateway process running this task stopped before "
                        "it finished; call the tool again.")}),
                    message="Its gateway process stopped."):
                self._about.setdefault(found.task_id, (found.owner, "", found.created_at))
                self._told(found.task_id, "failed", error=f"its runner {found.runner!r} stopped")
                self._about.pop(found.task_id, None)
            found = await self._state(records.get, task_id, owner) or found
        return found

    def _dead(self, record: TaskRecord) -> bool:
        if record.runner == self.runner:
            return True  # ours, yet not running here: lost
        alive = _alive(record.runner)
        if alive is False or (alive and record.runner.split(":")[1] == str(os.getpid())):
            return True  # gone, or this very pid in an earlier life
        return time.time() - record.beat_at > STALE

    def _envelope(self, record: TaskRecord) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": record.task_id, "status": record.status,
            "createdAt": _iso(record.created_at), "lastUpdatedAt": _iso(record.updated_at),
            "ttlMs": record.ttl_ms, "pollIntervalMs": record.poll_ms}
        if record.message is not None:
            out["statusMessage"] = record.message
        return out

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams
                  ) -> dict[str, Any]:
        """`tasks/get`: the task, with its result or error once it has one."""
        self._declared(ctx, "tasks/get")
        found = await self._find(ctx, params.task_id)
        out = self._envelope(found)
        if found.status == "completed" and found.result is not None:
            out["result"] = json.loads(found.result)
        if found.status == "failed" and found.error is not None:
            out["error"] = json.loads(found.error)
        if found.status == "input_required" and found.inputs is not None:
            out["inputRequests"] = json.loads(found.inputs)
        return out

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams
                     ) -> dict[str, Any]:
        """`tasks/cancel`: an empty acknowledgement; a running task ends `cancelled`."""
        self._declared(ctx, "tasks/cancel")
        found = await self._find(ctx, params.task_id)
        if found.status in RUNNING:
            if await self._state(self._records().finish, found.task_id, "cancelled",
                                 message="Cancelled by its client."):
                self._about.setdefault(found.task_id, (found.owner, "", found.created_at))
                self._told(found.task_id, "cancelled")
            scope = self._runs.pop(found.task_id, None)
            if scope is not None:
                scope.cancel()
        return {}

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams
                     ) -> dict[str, Any]:
        """`tasks/update`: an empty acknowledgement; answers to the task's open questions are
        handed to its run (partial answers kept, unknown keys ignored)."""
        self._declared(ctx, "tasks/update")
        found = await self._find(ctx, params.task_id)
        if params.input_responses and found.status == "input_required":
            took = await self._state(self._records().respond, found.task_id, found.owner,
                                     dict(params.input_responses))
            woken = self._woken.get(found.task_id)
            if took and woken is not None:
                woken.set()
        return {}
