"""The 2026-07-28 input-required flow: an upstream's question to a client that cannot be asked.

Owns parked calls. A 2026-07-28 client takes no server→client requests; it is asked by an
`InputRequiredResult` answer and retries its call with the responses. An upstream asks mid-call
(sampling, elicitation, roots), so a 2026-07-28 client's call runs in a task of its own: when the
upstream asks, the client's request is answered `InputRequiredResult` (the questions, and an opaque
`request_state` naming the parked call) while the upstream keeps waiting; the retry hands the
responses to the upstream's questions and waits again, for the result or the next questions.
Questions an upstream asks together are put together: an answer waits `GATHER` s after the first
question for the others. The law: a parked call is resumed only by a retry of the same scope
carrying its latest state (an unguessable token, a new one each round, so a state is good for one
retry) for the very call it was minted for — the same method, name or URI and arguments, bound by
a digest (`binding`); a retry of another call is refused saying so — each question is answered
once, and nothing waits without a bound — an unanswered question fails the upstream's request
after `ASK_TIMEOUT`, and a finished call nobody collects is forgotten after `KEEP_DONE`. A
question's key is unique over its call's life. A call that became a task (`edge.tasks`) is
followed by its task instead of retries (`parked`, `follow`, `abandon`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

R = TypeVar("R", bound=BaseModel)
ASK_TIMEOUT = 300.0
"""Seconds a question waits for the client's retry before the upstream is told it failed."""
KEEP_DONE = 300.0
"""Seconds a finished parked call waits to be collected."""
GATHER = 0.1
"""Seconds an answer waits after an upstream's first question for the questions asked with it."""


_RETRY_FIELDS = frozenset({"meta", "input_responses", "request_state"})
"""What a retry adds or may change beside the call itself."""


def binding(method: str, params: BaseModel) -> str:
    """A digest of the call `params` make under `method`: its name or URI and arguments, without
    what a retry carries beside them (its state, responses and `_meta`); absent and empty
    arguments are the same call."""
    dumped = params.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude=set(_RETRY_FIELDS))
    if dumped.get("arguments") == {}:
        del dumped["arguments"]
    text = json.dumps([method, dumped], sort_keys=True, ensure_ascii=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(eq=False)
class _Question:
    request: Any
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


@dataclass(eq=False)
class Parked:
    """One client call running in its own task while its client is asked for input."""

    token: str
    owner: object
    call: str = ""
    """The `binding` of the call it runs: a retry must make the same call."""
    changed: anyio.Event = field(default_factory=anyio.Event)
    unsent: dict[str, _Question] = field(default_factory=dict)
    waiting: dict[str, _Question] = field(default_factory=dict)
    result: Any = None
    error: BaseException | None = None
    done_at: float | None = None
    answered_once: bool = False
    """Whether the client request that started it has been answered (progress has no stream)."""
    live: int = 0
    """Client requests of this call being served now (the first, or a retry)."""
    keys: set[str] = field(default_factory=set)
    """Every key its questions were given: none is given twice."""
    scope: anyio.CancelScope | None = None
    """Its run's, to end it (`Parking.abandon`)."""

    @property
    def pending(self) -> dict[str, Any]:
        """The questions put to its client and not answered yet, by key."""
        return {k: q.request for k, q in self.waiting.items()}

    @property
    def asleep(self) -> bool:
        """Whether the call waits on its client alone: its questions were put in an answer, none
        is answered yet and no request of it is being served, so its upstream handler is blocked
        on them (`relay` puts a new question to a call that is awake first)."""
        return self.live == 0 and self.answered_once and not self.unsent and bool(self.waiting)

    async def ask(self, request: Any, result_type: type[R]) -> R | types.ErrorData:
        """The upstream's question, put to the client by the next answer of its call."""
        key = f"q{secrets.token_hex(4)}"
        while key in self.keys:
            key = f"q{secrets.token_hex(4)}"
        self.keys.add(key)
        question = _Question(request)
        self.unsent[key] = question
        self.changed.set()
        with anyio.move_on_after(ASK_TIMEOUT):
            await question.answered.wait()
        if not question.answered.is_set():
            self.waiting.pop(key, None)
            self.unsent.pop(key, None)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=(
                f"byref gateway: the client did not answer {request.method} within "
                f"{ASK_TIMEOUT:g} s."))
        answer = question.answer
        if isinstance(answer, types.ErrorData):
            return answer
        dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True) \
            if isinstance(answer, BaseModel) else answer
        return result_type.model_validate(dumped, by_name=False)

    def answer(self, responses: dict[str, Any]) -> None:
        """Hand the client's answers to the questions waiting under their keys (unknown or already
        answered keys are ignored)."""
        for key, response in responses.items():
            question = self.waiting.pop(key, None)
            if question is not None and not question.answered.is_set():
                question.answer = response
                question.answered.set()


class Parking:
    """Parked calls by token; their tasks run in the server's lifespan task group."""

    def __init__(self) -> None:
        self._parked: dict[str, Parked] = {}
        self._group: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: parked calls' tasks live as long as it serves."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield {}
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def call(self, owner: object, state: str | None, responses: dict[str, Any] | None,
                   run: Callable[[Parked], Awaitable[Any]], *, call: str,
                   task: bool = False) -> Any:
        """A call's answer: its result, or `InputRequiredResult` while its upstream asks.
        `call` is the request's `binding`: a state minted for another call is refused. A `task`'s
        call is ended when the wait for it is cancelled (its task was: nobody will follow it)."""
        self._sweep()
        if state is not None:
            parked = self._parked.get(state)
            if parked is None or parked.owner is not owner:
                raise MCPError(types.INVALID_PARAMS, (
                    "This requestState names no call waiting for input here (it finished, "
                    "expired, or belongs to another session); call the tool again without it."))
            if parked.call != call:  # the parked call is left waiting for its own retry
                raise MCPError(types.INVALID_PARAMS, (
                    "This requestState was issued for another call: retry with the same "
                    "method, name or URI and arguments as the call that returned it, or make "
                    "this call again without a requestState."))
            del self._parked[parked.token]  # a state is good for one retry: the next is new
            parked.token = secrets.token_urlsafe(24)
            self._parked[parked.token] = parked
            parked.answer(responses or {})
        else:
            if self._group is None:
                raise MCPError(types.INTERNAL_ERROR, "The gateway is not serving (no lifespan).")
            parked = Parked(secrets.token_urlsafe(24), owner, call)
            self._parked[parked.token] = parked
            self._group.start_soon(self._run, parked, run)
        parked.live += 1
        try:
            return await self._next(parked)
        except anyio.get_cancelled_exc_class():
            if task:
                self.abandon(parked)
            raise
        finally:
            parked.live -= 1

    def parked(self, state: str | None, owner: object) -> Parked | None:
        """The call parked under `state` for `owner`, to be followed by its task."""
        found = self._parked.get(state) if state is not None else None
        return found if found is not None and found.owner is owner else None

    async def follow(self, parked: Parked) -> Any:
        """What a call answered with all its questions answered says next: its result (or its
        error, raised), or `InputRequiredResult` with its next questions."""
        parked.live += 1
        try:
            return await self._next(parked)
        finally:
            parked.live -= 1

    def abandon(self, parked: Parked) -> None:
        """End a call nobody will follow (its task was cancelled)."""
        self._parked.pop(parked.token, None)
        if parked.scope is not None:
            parked.scope.cancel()

    async def _run(self, parked: Parked, run: Callable[[Parked], Awaitable[Any]]) -> None:
        try:
            with anyio.CancelScope() as parked.scope:
                parked.result = await run(parked)
        except Exception as exc:  # the answer for the client's next request
            parked.error = exc
        finally:
            parked.done_at = time.monotonic()
            parked.changed.set()

    async def _next(self, parked: Parked) -> Any:
        while True:
            if parked.unsent:
                with anyio.move_on_after(GATHER):  # the questions asked with it come meanwhile
                    while parked.done_at is None:
                        parked.changed = anyio.Event()
                        await parked.changed.wait()
                asks = dict(parked.unsent)
                parked.unsent.clear()
                parked.waiting.update(asks)
                parked.changed = anyio.Event()
                parked.answered_once = True
                return types.InputRequiredResult(
                    input_requests={k: q.request for k, q in asks.items()},
                    request_state=parked.token)
            if parked.done_at is not None:
                self._parked.pop(parked.token, None)
                if parked.error is not None:
                    raise parked.error
                return parked.result
            await parked.changed.wait()
            parked.changed = anyio.Event()

    def _sweep(self) -> None:
        now = time.monotonic()
        for token, parked in list(self._parked.items()):
            if parked.done_at is not None and now - parked.done_at > KEEP_DONE:
                del self._parked[token]
