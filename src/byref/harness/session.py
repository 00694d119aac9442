"""`Session`: byref inside your own model loop, in the provider's own shapes.

Owns one conversation's transcript, store, scope and dispatcher for a caller who talks to the
model with their own SDK code. `declarations(provider)` gives the tool list in that provider's
shape (byte-stable turn after turn); `await handle(calls, provider)` takes that provider's tool
calls as the SDK returned them and answers its tool results, doing the seq/part bookkeeping. The
law: the calls of one turn run concurrently, and their results are recorded and returned in call
order; nothing a model writes raises out of `handle` (bad calls come back as error results).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from byref.dispatch import Call, Dispatcher, Policy
from byref.errors import InvalidValue
from byref.events import Emitter
from byref.reads import ReadLimits
from byref.store import ArtifactStore, MemoryStore, Scope
from byref.tools import Tool, builtin_tools
from byref.transcript import Part, Transcript

Provider = Literal["anthropic", "openai", "openai-chat", "mcp"]
PROVIDER_SHAPES: tuple[Provider, ...] = ("anthropic", "openai", "openai-chat", "mcp")

SYSTEM_NOTE = (
    "Tool results that are large are stored and shown as a preview with a reference such as "
    '{"$ref": {"type": "Message", "seq": 4, "part": 0, "field": "value"}} or '
    '{"$ref": {"type": "Blob", "key": "art_…"}}. Pass a reference as any tool argument instead '
    "of retyping data; read parts with read_result, read_json or query_json."
)
"""A sentence for your system prompt, so the model knows what a reference is."""


class Session:
    """byref for a loop you write: `declarations(provider)`, then `await handle(calls, …)`."""

    def __init__(self, tools: Sequence[Tool] = (), *,
                 store: ArtifactStore | Literal["memory"] | None = "memory",
                 scope: Scope | None = None, policy: Policy | None = None,
                 transcript: Transcript | None = None, emit: Emitter | None = None) -> None:
        self.policy = policy or Policy()
        self.transcript = transcript if transcript is not None else Transcript()
        self.store: ArtifactStore | None = MemoryStore(emit=emit) if store == "memory" else store
        self.scope = scope or Scope("local", conversation=uuid.uuid4().hex)
        declared = list(tools)
        if self.store is not None and self.policy.refs:
            have = {t.name for t in declared}
            declared.extend(t for t in builtin_tools(ReadLimits(
                auto_insert_bytes=self.policy.auto_insert_bytes)) if t.name not in have)
        self.dispatcher = Dispatcher(declared, transcript=self.transcript, store=self.store,
                                     scope=self.scope, policy=self.policy, emit=emit)

    # -- what the model is declared ------------------------------------------------------------
    @property
    def system(self) -> str:
        """A sentence to add to your system prompt: what a reference is and how to pass one."""
        return SYSTEM_NOTE

    def declarations(self, provider: Provider = "anthropic") -> list[dict[str, Any]]:
        """The tools in `provider`'s request shape, name-sorted and byte-stable."""
        return [_declare(d, _provider(provider)) for d in self.dispatcher.declarations()]

    # -- one turn's tool calls -----------------------------------------------------------------
    def user(self, text: str) -> None:
        """Record the user's words (optional: refs address tool parts, not these)."""
        self.transcript.append("user", [Part(type="text", value=text)])

    async def handle(self, calls: Sequence[Any], provider: Provider = "anthropic"
                     ) -> list[dict[str, Any]]:
        """Run one model turn's tool calls (as the SDK returned them: objects or dicts) and
        answer their results in `provider`'s shape, in call order."""
        shape = _provider(provider)
        parsed = [_call(c, shape, i) for i, c in enumerate(calls)]
        if not parsed:
            return []
        call_seq = self.transcript.append(
            "assistant", [self.dispatcher.call_part(c) for c in parsed]).seq
        parts = await asyncio.gather(*(
            self.dispatcher.adispatch(c, call_seq=call_seq, seq=call_seq + 1, part=i)
            for i, c in enumerate(parsed)))
        self.transcript.append("tool", list(parts))
        return [_result(c, p, shape) for c, p in zip(parsed, parts, strict=True)]

    def handle_sync(self, calls: Sequence[Any], provider: Provider = "anthropic"
                    ) -> list[dict[str, Any]]:
        """`handle` for code without an event loop."""
        return asyncio.run(self.handle(calls, provider))


def _provider(name: str) -> Provider:
    if name not in PROVIDER_SHAPES:
        raise InvalidValue(f"Unknown provider shape {name!r}; use one of "
                           f"{', '.join(map(repr, PROVIDER_SHAPES))}.")
    return name


def _declare(d: dict[str, Any], provider: Provider) -> dict[str, Any]:
    name, description, schema = d["name"], d.get("description", ""), d["input_schema"]
    if provider == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if provider == "openai":
        return {"type": "function", "name": name, "description": description,
                "parameters": schema, "strict": False}
    if provider == "openai-chat":
        return {"type": "function",
                "function": {"name": name, "description": description, "parameters": schema}}
    return {"name": name, "description": description, "inputSchema": schema}


def _get(item: Any, key: str, default: Any = None) -> Any:
    return item.get(key, default) if isinstance(item, dict) else getattr(item, key, default)


def _call(item: Any, provider: Provider, index: int) -> Call:
    """A provider's tool call as byref's `Call`; anything malformed is left for dispatch to
    refuse (a missing name becomes '', arguments that are not JSON stay text)."""
    if provider == "openai-chat":
        function = _get(item, "function", {}) or {}
        call_id, name, args = _get(item, "id"), _get(function, "name"), _get(function, "arguments")
    elif provider == "openai":
        call_id = _get(item, "call_id") or _get(item, "id")
        name, args = _get(item, "name"), _get(item, "arguments")
    else:  # anthropic tool_use blocks, MCP tools/call params
        call_id, name = _get(item, "id"), _get(item, "name")
        args = _get(item, "input") if provider == "anthropic" else _get(item, "arguments")
    if isinstance(args, str):
        # Arguments that are not JSON stay text: dispatch refuses them, saying so.
        with contextlib.suppress(ValueError):
            args = json.loads(args) if args.strip() else {}
    return Call(str(call_id or f"call_{index}"), str(name or ""), {} if args is None else args)


def _result(call: Call, part: Part, provider: Provider) -> dict[str, Any]:
    text = part.rendered if part.rendered is not None else str(part.value)
    if provider == "anthropic":
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
        if part.is_error:
            out["is_error"] = True
        return out
    if provider == "openai":
        return {"type": "function_call_output", "call_id": call.id, "output": text}
    if provider == "openai-chat":
        return {"role": "tool", "tool_call_id": call.id, "content": text}
    return {"content": [{"type": "text", "text": text}], "isError": part.is_error}
