"""The per-call pipeline: parse → validate → wants → resolve → execute → intercept payloads →
place → record → events.

The law: a call either runs with every argument delivered exactly, or does not run and the model
is told what went wrong in words it can act on (a refusal, `is_error` set, a `refused` event with
its reason). Nothing is recorded half: artifacts minted by a call whose result cannot be recorded
are deleted again.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from byref.dispatch.placement import settle
from byref.dispatch.policy import Policy
from byref.dispatch.results import render, shape_result
from byref.dispatch.wants import WantsRefusal, redeem
from byref.events import Emitter
from byref.jsonview import JsonEncodeError, unrecordable
from byref.refs import (
    ENVELOPE_RULE,
    Blob,
    JsonPointer,
    JsonQuery,
    Message,
    Ref,
    RefRefusal,
    is_envelope,
    near_envelope,
    parse_model_envelope,
    quote,
)
from byref.resolve import Caps, Resolver
from byref.store import ArtifactMeta, ArtifactStore, Scope
from byref.tools.context import ToolContext
from byref.tools.tool import Tool, ToolRefusal
from byref.transcript import Part, Transcript

REFUSAL_MAX = 1_800
"""A refusal the model reads is at most this many characters, whatever it quotes."""


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    name: str
    input: Any

    def recordable(self) -> Call:
        """This call as the transcript can hold it: text that is not valid Unicode is escaped,
        an integer too long to write becomes a note. Only a call that is refused needs it."""
        if unrecordable([self.id, self.name, self.input]) is None:
            return self
        return Call(_escaped(self.id), _escaped(self.name), _escaped(self.input))


class Refusal(Exception):
    """The tool did not run (or its result was refused); `text` is what the model is told."""

    def __init__(self, text: str, reason: str, *, ref: str | None = None,
                 detail: str | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.reason = reason
        self.ref = ref
        self.detail = detail


class Dispatcher:
    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        transcript: Transcript,
        store: ArtifactStore | None,
        scope: Scope,
        policy: Policy | None = None,
        caps: Caps | None = None,
        emit: Emitter | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            names = [t.name for t in tools]
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"Tool names must be unique; repeated: {dupes!r}.")
        needy = sorted(t.name for t in tools if t.wants)
        if needy and store is None:
            raise ValueError(
                f"Tool(s) {needy!r} declare `wants` but no artifact store is attached; pass "
                "store=MemoryStore() (or any ArtifactStore) when building the agent."
            )
        self.transcript = transcript
        self.store = store
        self.scope = scope
        self.policy = policy or Policy()
        self.caps = caps or Caps()
        self.emit = emit or Emitter()
        self.resolver = Resolver(transcript, store, scope, caps=self.caps, emit=self.emit)

    def declarations(self) -> list[dict[str, Any]]:
        """Tool declarations, name-sorted, byte-stable across turns."""
        self.refresh()
        ordered = sorted(self.tools.values(), key=lambda t: t.name)
        if self.policy.refs:
            return [t.declaration() for t in ordered]
        return [t.plain_declaration() for t in ordered]

    def refresh(self) -> None:
        """Let tools with live descriptions (run_python's inventory) update before a request."""
        for t in self.tools.values():
            if t.refresh is not None:
                t.refresh()

    # -- recording the call --------------------------------------------------------------------
    def call_part(self, call: Call) -> Part:
        """The transcript part for a call; `$ref` arguments are recorded as derived fields."""
        call = call.recordable()
        derived: dict[str, Ref] = {}
        if self.policy.refs and isinstance(call.input, dict):
            for name, value in call.input.items():
                # A ref that does not parse is recorded verbatim and refused at dispatch.
                if is_envelope(value):
                    with contextlib.suppress(RefRefusal):
                        derived[f"input.{name}"] = parse_model_envelope(
                            value, cap=self.caps.validation
                        )
        return Part(
            type="tool_call", value={"name": call.name, "id": call.id, "input": call.input},
            tool=call.name, call_id=call.id, derived=derived,
        )

    # -- running it ----------------------------------------------------------------------------
    def dispatch(self, call: Call, *, call_seq: int, seq: int, part: int) -> Part:
        """Run `call` (recorded at `call_seq`); its result will be message `seq`, part `part`.

        Never raises for anything the model wrote or a tool returned: that is a refusal for the
        model and a `refused` event for the operator.
        """
        try:
            return self._dispatch(call, call_seq=call_seq, seq=seq, part=part)
        except Exception as exc:  # a defect below dispatch must not end the caller's loop
            self.emit("refused", op="dispatch", tool=_escaped(call.name)[:200],
                      call_id=_escaped(call.id)[:200], reason="internal-error",
                      detail=f"{type(exc).__name__}: {_escaped(str(exc))[:500]}")
            return self._refused(call, Refusal(
                f"Tool {quote(call.name)} did not run: byref could not process this call "
                f"({type(exc).__name__}). Nothing was kept; try again or another way.",
                "internal-error"), emit=False)

    def _dispatch(self, call: Call, *, call_seq: int, seq: int, part: int) -> Part:
        try:
            problem = (unrecordable(call.name, where="the tool name")
                       or unrecordable(call.id, where="the call id")
                       or unrecordable(call.input, where="the input"))
            if problem is not None:
                raise Refusal(
                    f"Tool {quote(call.recordable().name)} did not run: {problem}. Write the "
                    "value as valid UTF-8 text (or a number of at most a few thousand digits).",
                    "invalid-input", detail=problem)
            tool = self._tool(call.name)
            raw = self._input(tool, call.input, call_seq)
            self._parse_refs(tool, raw)
            self._validate(tool, raw)
            wanted = self._wants(tool, raw, call_seq)
            args = self._arguments(tool, raw, call_seq)
            ctx = ToolContext(self.resolver, self.store, self.scope, self.transcript, self.emit,
                              tool.name, call.id, wanted)
            value = self._execute(tool, args, ctx)
        except Refusal as refusal:
            return self._refused(call, refusal)
        return self._record(tool, call, value, seq=seq, part=part)

    def _refused(self, call: Call, refusal: Refusal, *, emit: bool = True) -> Part:
        call = call.recordable()
        if emit:
            self.emit("refused", op="dispatch", tool=call.name, call_id=call.id,
                      reason=refusal.reason, ref=refusal.ref, detail=_clip(refusal.detail))
        text = self.error_text(call, _clip(_escaped(refusal.text), REFUSAL_MAX) or "")
        return Part(type="tool_result", value=text, rendered=text,
                    tool=call.name, call_id=call.id, is_error=True)

    def _tool(self, name: str) -> Tool:
        if name in self.tools:
            return self.tools[name]
        close = difflib.get_close_matches(name[:200], list(self.tools), n=3)
        names = close or sorted(self.tools)[:10]
        raise Refusal(
            f"There is no tool {quote(name)}. Tools you can call: {', '.join(map(repr, names))}.",
            "unknown-tool",
        )

    def _input(self, tool: Tool, raw: Any, call_seq: int) -> dict[str, Any]:
        almost = near_envelope(raw) if self.policy.refs else None
        if almost is not None:
            raise Refusal(f"Tool {tool.name!r} did not run: the input is almost a reference, "
                          f"but not quite. {almost} {ENVELOPE_RULE}", "bad-ref")
        if self.policy.refs and is_envelope(raw):
            raw = self._resolve(tool, "the input", raw, call_seq, lazy=False)
        if not isinstance(raw, dict):
            raise Refusal(
                f"Input to tool {tool.name!r} must be a JSON object of its parameters, got "
                f"{type(raw).__name__!r}.", "invalid-input",
            )
        return dict(raw)

    def _parse_refs(self, tool: Tool, raw: dict[str, Any]) -> None:
        """Refs are parsed first, so a forged or malformed one gets the parser's precise words."""
        if not self.policy.refs:
            return
        for name, value in raw.items():
            if is_envelope(value):
                try:
                    parse_model_envelope(value, cap=self.caps.validation)
                except RefRefusal as exc:
                    raise Refusal(
                        f"Tool {tool.name!r} did not run: argument {quote(name)} is a reference "
                        f"that cannot be used. {exc}", "bad-ref",
                    ) from exc
                continue
            almost = near_envelope(value)
            if almost is not None:
                raise Refusal(
                    f"Tool {tool.name!r} did not run: argument {quote(name)} is almost a "
                    f"reference, but not quite. {almost} {ENVELOPE_RULE}", "bad-ref")

    def _validate(self, tool: Tool, raw: dict[str, Any]) -> None:
        """The validation dial: the input as written, against the schema the model was shown."""
        if self.policy.validation == "off":
            return
        validator = tool.declared_validator() if self.policy.refs else tool.plain_validator()
        error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
        if error is None:
            return
        at = _clip("/".join(str(p) for p in error.absolute_path), 200) or "the input"
        message = _clip(error.message, 400)
        text = (f"Tool {tool.name!r} was not executed: its input does not fit its schema at "
                f"{at!r}: {message}.")
        if self.policy.validation == "enforce":
            raise Refusal(text, "invalid-input", detail=message)
        self.emit("refused", op="validate", tool=tool.name, reason="invalid-input",
                  detail=message, enforced=False)

    def _wants(self, tool: Tool, raw: dict[str, Any], call_seq: int) -> dict[str, ArtifactMeta]:
        if not tool.wants:
            return {}
        assert self.store is not None  # checked when the dispatcher was built
        try:
            return redeem(tool, raw, store=self.store, scope=self.scope, resolver=self.resolver,
                          call_seq=call_seq, cap=self.caps.validation)
        except WantsRefusal as refusal:
            raise Refusal(refusal.text, refusal.reason, ref=refusal.ref,
                          detail=refusal.detail) from None

    def _arguments(self, tool: Tool, raw: dict[str, Any], call_seq: int) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for name, value in raw.items():
            if self.policy.refs and name not in tool.wants and is_envelope(value):
                value = self._resolve(tool, f"argument {quote(name)}", value, call_seq,
                                      lazy=name in tool.lazy)
            args[name] = value
        try:
            return tool.convert(args)
        except RefRefusal as exc:
            raise Refusal(str(exc), "invalid-arguments") from exc

    def _resolve(self, tool: Tool, what: str, value: Any, call_seq: int, *, lazy: bool) -> Any:
        try:
            ref = _pin(parse_model_envelope(value, cap=self.caps.validation), call_seq)
            return ref if lazy else self.resolver.value(ref, current_seq=call_seq)
        except RefRefusal as exc:
            raise Refusal(
                f"Tool {tool.name!r} did not run: {what} is a reference that cannot be used. "
                f"{exc}", "bad-ref",
            ) from exc

    def _execute(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            return tool.invoke(args, ctx)
        except ToolRefusal as exc:
            raise Refusal(exc.text, exc.reason) from exc
        except RefRefusal as exc:
            raise Refusal(f"Tool {tool.name!r} could not complete: {exc}", "bad-ref") from exc
        except Exception as exc:  # a tool's own failure is reported to the model, not raised
            raise Refusal(
                f"Tool {tool.name!r} failed: {type(exc).__name__}: {_clip(str(exc), 600)}",
                "tool-error",
            ) from exc

    def _record(self, tool: Tool, call: Call, value: Any, *, seq: int, part: int) -> Part:
        shaped = None
        try:
            shaped = shape_result(value, tool=tool.name, seq=seq, part=part, policy=self.policy,
                                  store=self.store, scope=self.scope)
            text = render(shaped.shown)
            placed = settle(text, shaped.shown, tool=tool.name, ceiling=tool.ceiling,
                            result_kind=tool.result_kind, is_error=False, policy=self.policy,
                            store=self.store, scope=self.scope, explicit_read=tool.explicit_read)
            if placed.how == "placed":
                assert placed.ref is not None
                shaped.minted.append(placed.ref)
                self.emit("placed", tool=tool.name, ref=placed.ref, bytes=len(text.encode()))
            elif placed.how == "truncated":
                self.emit("refused", op="net", tool=tool.name, reason="truncated",
                          bytes=len(text.encode()))
            recorded = shaped.recorded if placed.how == "inline" else placed.recorded
            derived = shaped.derived
            if placed.how == "placed":
                # The substitute stands for the stored result: a ref to the part, or to its
                # `value`, delivers the result itself.
                stored = Blob(key=placed.ref)
                derived = {**derived, "": stored, "value": stored}
            candidate = Part(type="tool_result", value=recorded, rendered=placed.text,
                             tool=tool.name, call_id=call.id, is_error=placed.how == "ceiling",
                             derived=derived)
            # Encode as the transcript will, so a failure happens before anything lands.
            render(candidate.to_json())
            if placed.how == "ceiling":
                self.emit("refused", op="ceiling", tool=tool.name, call_id=call.id,
                          reason="over-ceiling")
            return candidate
        except (JsonEncodeError, TypeError) as exc:
            if self.store is not None and shaped is not None:
                for ref in shaped.minted:
                    self.store.delete(self.scope, ref)
            text = (
                f"Tool {tool.name!r} returned a value that cannot be recorded "
                f"({_clip(_escaped(str(exc)), 400)}); nothing was kept. This is a defect in the "
                "tool, not in your call."
            )
            self.emit("refused", op="record", tool=tool.name, call_id=call.id,
                      reason="unserializable-result")
            return Part(type="tool_result", value=text, rendered=text, tool=tool.name,
                        call_id=call.id, is_error=True)

    def error_text(self, call: Call, text: str) -> str:
        """Errors are never placed; the net still bounds them."""
        return settle(text, text, tool=call.name, ceiling=None, result_kind=None, is_error=True,
                      policy=self.policy, store=self.store, scope=self.scope).text


def _clip(text: str | None, limit: int = 500) -> str | None:
    """At most `limit` characters of a message, saying how long it really was."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text):,} characters in all]"


def _escaped(value: Any) -> Any:
    """`value` with every string made valid Unicode (lone surrogates backslash-escaped) and every
    integer too long to record replaced by a note; everything else as it was."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14_000:
        return f"<{quote(value)}>"
    if isinstance(value, dict):
        return {_escaped(k) if isinstance(k, str) else str(k): _escaped(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


def _pin(ref: Ref, current: int) -> Ref:
    """Give a Message ref written without `seq` the seq of the turn it was written in."""
    if isinstance(ref, Message) and ref.seq is None:
        return Message(part=ref.part, seq=current, field=ref.field)
    if isinstance(ref, Blob) and ref.source is not None:
        return Blob(source=_pin(ref.source, current))
    if isinstance(ref, JsonPointer):
        return JsonPointer(_pin(ref.source, current), ref.path)
    if isinstance(ref, JsonQuery):
        return JsonQuery(_pin(ref.source, current), ref.path, ref.filter)
    return ref
