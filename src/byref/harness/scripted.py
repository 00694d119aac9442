"""`ScriptedModel`: a model that plays a script. A real feature for offline runs, demos and tests.

Each step is a `Response`, or a function of the `Request` that returns one, so a step can read what
the model saw (for example, take the ref out of the previous tool result) exactly as a model would.
Given a streaming callback it hands over each step's blocks as the fragments a stream would carry.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from byref.dispatch.outbound.reflines import copied, split
from byref.errors import DeveloperError, MisuseError
from byref.harness.messages import Block, OnDelta, Request, Response, deltas
from byref.jsonview import decode

Step = Response | Callable[[Request], Response]


class ScriptExhaustedError(DeveloperError, RuntimeError):
    """The harness asked for another turn after the script's last step."""


class ScriptedModel:
    """A `Model` that answers each turn with the next step of its script; `seen` keeps every
    request it was given."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self._steps = list(steps)
        self._next = 0
        self.seen: list[Request] = []

    async def respond(self, request: Request, *, on_delta: OnDelta | None = None) -> Response:
        """The next step's response (a function step reads `request` first)."""
        response = self.play(request)
        if on_delta is not None:
            for delta in deltas(response):
                on_delta(delta)
        return response

    def play(self, request: Request) -> Response:
        """`respond` without a loop: record `request` and play the next step."""
        self.seen.append(request)
        if self._next >= len(self._steps):
            raise ScriptExhaustedError(
                f"The script has {len(self._steps)} steps and all were played; add a final "
                "say(...) step so the run ends with text."
            )
        step = self._steps[self._next]
        self._next += 1
        return step(request) if callable(step) else step


_ids = itertools.count(1)


def say(text: str) -> Response:
    """A final text turn."""
    return Response((Block("text", text=text),))


def call(name: str, input: dict[str, Any] | Callable[[Request], dict[str, Any]]) -> Step:
    """A tool call; `input` may be computed from the request the model is answering."""

    def step(request: Request) -> Response:
        args = input(request) if callable(input) else input
        return Response((Block("tool_use", id=f"call_{next(_ids)}", name=name, input=args),))

    return step


def last_result(request: Request) -> Any:
    """The most recent tool result the model was shown, parsed as JSON (or the raw text), without
    its ref line (`last_ref` has that)."""
    text = _last_result_text(request)
    body, _ = split(text)
    try:
        return decode(body)
    except Exception:
        return body


def last_ref(request: Request) -> dict[str, Any]:
    """The `$ref` of the most recent tool result the model was shown (its ref line's)."""
    text = _last_result_text(request)
    _, line = split(text)
    if line is None:
        raise MisuseError("the last tool result the model was shown has no ref line")
    return copied(line)


def _last_result_text(request: Request) -> str:
    for message in reversed(request.messages):
        for block in reversed(message.content):
            if block.type == "tool_result":
                return block.text
    raise MisuseError("the model has not been shown any tool result yet")


def ref_from_last_result(field: str = "value") -> Callable[[Request], Any]:
    """Read the `$ref` the model was shown at `field` of the previous result."""

    def read(request: Request) -> Any:
        return last_result(request)[field]

    return read
