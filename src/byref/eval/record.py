"""Every model turn of an eval kept, metered and replayable.

`Metered` wraps the model of one (task, arm) run: it times each turn, takes the tokens from the
provider's reported usage (or, for a model that reports none such as the scripted oracle,
counts them with byref's tokenizer), and keeps the turn as JSON. `Replayed` plays such turns
back. Artifact keys are minted at random each run, so a turn keeps the keys its request showed
in order of first appearance, and a replay maps them onto the keys the new run minted in the
same order: a recorded ref still points at the same result.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from byref.errors import InvalidValue, OperatorError
from byref.harness.messages import Block, Model, OnDelta, Request, Response, Usage
from byref.harness.providers import ProviderError
from byref.harness.scripted import ScriptedModel
from byref.harness.tokens import count_tokens
from byref.jsonview import decode, dumps, encode

_KEY = re.compile(r"art_[0-9A-Za-z]{22}")
_FIXED_KEY = "art_" + "0" * 22
_OVERFLOW = re.compile(r"context|length|too long|exceed|n_ctx|max_tokens|maximum", re.I)


class BudgetExceeded(OperatorError):
    """The model's server refused the request as too long (or stopped mid-call for length)."""


class TokenTally:
    """Token counts with byref's tokenizer, each distinct text counted once per eval. Artifact
    keys are minted at random and split into a varying number of tokens, so each is counted as
    one fixed key of the same length: the oracle's figures repeat run after run."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens in `text` (cached)."""
        if text not in self._seen:
            self._seen[text] = count_tokens(_KEY.sub(_FIXED_KEY, text))
        return self._seen[text]

    def request(self, request: Request) -> int:
        """Tokens of a whole request: system, declarations and every block."""
        total = self.count(request.system) + self.count(request.tools_text())
        for message in request.messages:
            for b in message.content:
                total += self.count(b.text if b.type != "tool_use" else b.name + dumps(b.input))
        return total

    def response(self, response: Response) -> int:
        """Tokens the model wrote: its text and its calls' names and arguments."""
        return sum(self.count(b.text if b.type != "tool_use" else b.name + dumps(b.input))
                   for b in response.blocks)


def keys_of(request: Request) -> list[str]:
    """The artifact keys a request shows, in order of first appearance."""
    seen: dict[str, None] = {}
    for message in request.messages:
        for b in message.content:
            text = b.text if b.type != "tool_use" else dumps(b.input)
            for key in _KEY.findall(text):
                seen.setdefault(key, None)
    return list(seen)


def response_json(response: Response) -> list[dict[str, Any]]:
    """A response's blocks as JSON."""
    out: list[dict[str, Any]] = []
    for b in response.blocks:
        if b.type == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        else:
            out.append({"type": b.type, "text": b.text})
    return out


def response_of(blocks: Sequence[dict[str, Any]], usage: Usage | None) -> Response:
    """The response `response_json` wrote."""
    made = tuple(Block("tool_use", id=b["id"], name=b["name"], input=b["input"])
                 if b["type"] == "tool_use" else Block("text", text=b["text"]) for b in blocks)
    return Response(made, usage)


class Metered:
    """A model wrapped for one run: each turn timed, its tokens taken, and kept in `turns`."""

    def __init__(self, model: Model, tally: TokenTally) -> None:
        self.model = model
        self.tally = tally
        self.turns: list[dict[str, Any]] = []

    async def respond(self, request: Request, *, on_delta: OnDelta | None = None) -> Response:
        """The wrapped model's answer, metered."""
        started = time.perf_counter()
        try:
            response = await self.model.respond(request, on_delta=on_delta)
        except ProviderError as exc:
            if not _OVERFLOW.search(str(exc)):
                raise
            self.turns.append({"error": str(exc)[:500], "seconds": _since(started),
                               "keys": keys_of(request), "tokens_in": 0, "tokens_out": 0})
            raise BudgetExceeded(str(exc)) from exc
        # The oracle's own time (a script reading its request) is no model's time.
        seconds = 0.0 if isinstance(self.model, ScriptedModel) else _since(started)
        usage = response.usage
        reported = usage is not None and (usage.input_tokens or usage.output_tokens)
        turn: dict[str, Any] = {
            "blocks": response_json(response), "seconds": seconds, "keys": keys_of(request),
            "tokens_in": usage.input_tokens if reported and usage else self.tally.request(request),
            "tokens_out": (usage.output_tokens if reported and usage
                           else self.tally.response(response)),
            "counted": "provider" if reported else "tokenizer",
        }
        if usage is not None:
            turn["stop"] = usage.stop_reason
        self.turns.append(turn)
        return response


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)


class Replayed:
    """A model that plays recorded turns back, its refs mapped onto this run's keys."""

    def __init__(self, turns: Sequence[dict[str, Any]], where: str) -> None:
        self._turns = list(turns)
        self._where = where
        self._next = 0

    @property
    def played(self) -> list[dict[str, Any]]:
        """The recorded turns played so far."""
        return self._turns[:self._next]

    async def respond(self, request: Request, *, on_delta: OnDelta | None = None) -> Response:
        """The next recorded turn."""
        if self._next >= len(self._turns):
            raise InvalidValue(
                f"The recording {self._where!r} has {len(self._turns)} turns and the run asked "
                "for another: byref now answers differently than when it was recorded; record "
                "the run again.")
        turn = self._turns[self._next]
        self._next += 1
        mapping = dict(zip(turn.get("keys", []), keys_of(request), strict=False))
        if "error" in turn:
            raise BudgetExceeded(turn["error"])
        text = dumps(turn["blocks"])
        if mapping:
            text = _KEY.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
        usage = Usage(input_tokens=int(turn["tokens_in"]), output_tokens=int(turn["tokens_out"]),
                      stop_reason=str(turn.get("stop", "")))
        return response_of(decode(text), usage if turn.get("counted") == "provider" else None)


def write_turns(directory: Path, suite: str, task: str, arm: str,
                turns: list[dict[str, Any]]) -> None:
    """Keep one run's turns at `directory/suite/task/arm.json`."""
    path = directory / suite / _safe(task) / f"{arm}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode({"turns": turns}) + b"\n")


def read_turns(directory: Path, suite: str, task: str, arm: str) -> list[dict[str, Any]]:
    """The turns `write_turns` kept, or an error naming the missing file."""
    path = directory / suite / _safe(task) / f"{arm}.json"
    if not path.is_file():
        raise InvalidValue(f"No recording {str(path)!r}: replay only what --record wrote, with "
                           "the same suites, arms and --limit.")
    turns: list[dict[str, Any]] = decode(path.read_bytes())["turns"]
    return turns


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
