"""The argument stage of a call: from the input the model wrote to the values its tool receives.

The law: refs are parsed before anything else reads the input (a forged or malformed one gets the
parser's precise words), the input is validated as written against the schema the model was
shown, `wants` are redeemed, then each ref argument is resolved (a lazy one handed over unread,
each pinned to the turn it was written in). Any failure is a `Refusal`: the tool does not run.
"""

from __future__ import annotations

from typing import Any, Protocol

import jsonschema

from byref.dispatch.calls import Call, Refusal, clip
from byref.dispatch.inbound.nulls import without_absent_nulls
from byref.dispatch.inbound.wants import WantsRefusal, redeem
from byref.dispatch.policy import Policy
from byref.events import Emitter
from byref.refs import (
    ENVELOPE_KEY,
    ENVELOPE_RULE,
    Blob,
    JsonPointer,
    JsonQuery,
    MessageRef,
    Ref,
    RefRefusal,
    is_envelope,
    near_envelope,
    parse_model_envelope,
    parse_server_ref,
    quote,
)
from byref.resolve import Caps, Resolver
from byref.store import ArtifactMeta, ArtifactStore, Scope
from byref.tools.tool import Tool


class Owner(Protocol):
    """What the stage reads of its dispatcher (read at each call, never copied)."""

    policy: Policy
    caps: Caps
    resolver: Resolver
    store: ArtifactStore | None
    scope: Scope
    emit: Emitter


class Arguments:
    """One dispatcher's argument stage."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner

    def read(self, tool: Tool, call: Call, call_seq: int
             ) -> tuple[dict[str, Any], dict[str, ArtifactMeta]]:
        """(the arguments `tool` receives, the artifacts its `wants` redeemed) for `call`,
        recorded at `call_seq`; raises `Refusal` when the tool must not run."""
        raw = self._input(tool, call.input, call_seq)
        self._parse_refs(tool, raw, call.server_refs)
        self._validate(tool, raw, call.server_refs)
        wanted = self._wants(tool, raw, call_seq)
        return self._arguments(tool, raw, call_seq, call.server_refs), wanted

    def resolves(self, tool: Tool, raw: Any) -> bool:
        """Whether `read` reads the store or transcript for this input (mirrors `_input`,
        `_wants` and `_arguments`: a lazy argument's ref is handed over unread)."""
        if tool.wants:
            return True
        if not self._owner.policy.refs:
            return False
        if is_envelope(raw):
            return True
        return isinstance(raw, dict) and any(
            name not in tool.lazy and is_envelope(value) for name, value in raw.items())

    def _input(self, tool: Tool, raw: Any, call_seq: int) -> dict[str, Any]:
        almost = near_envelope(raw) if self._owner.policy.refs else None
        if almost is not None:
            raise Refusal(f"Tool {tool.name!r} did not run: the input is almost a reference, "
                          f"but not quite. {almost} {ENVELOPE_RULE}", "bad-ref")
        if self._owner.policy.refs and is_envelope(raw):
            raw = self._resolve(tool, "the input", raw, call_seq, lazy=False)
        if isinstance(raw, str):  # an adapter hands over arguments that did not parse as JSON
            raise Refusal(
                f"Input to tool {tool.name!r} must be a JSON object of its parameters; the "
                f"arguments arrived as text that is not one ({quote(raw, 80)}). Write them as "
                'a JSON object, e.g. {"name": value}.', "invalid-input")
        if not isinstance(raw, dict):
            raise Refusal(
                f"Input to tool {tool.name!r} must be a JSON object of its parameters, got "
                f"{type(raw).__name__!r}.", "invalid-input",
            )
        return without_absent_nulls(tool, raw)

    def parse_ref(self, value: Any, server: bool, current: int | None = None) -> Ref:
        """The ref an argument's envelope holds: the model's (recipes refused; a handle pinned
        as read in turn `current`, when given), or, for an argument in `Call.server_refs`, the
        server's own (recipes too)."""
        if server:
            return parse_server_ref(value[ENVELOPE_KEY], cap=self._owner.caps.validation)
        ref = parse_model_envelope(value, cap=self._owner.caps.validation)
        if current is not None and isinstance(ref, MessageRef) and ref.tail is not None:
            return ref.at(current)
        return ref

    def _parse_refs(self, tool: Tool, raw: dict[str, Any],
                    server: frozenset[str] = frozenset()) -> None:
        """Refs are parsed first, so a forged or malformed one gets the parser's precise words."""
        if not self._owner.policy.refs:
            return
        for name, value in raw.items():
            if is_envelope(value):
                try:
                    self.parse_ref(value, name in server)
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

    def _validate(self, tool: Tool, raw: dict[str, Any],
                  server: frozenset[str] = frozenset()) -> None:
        """The validation dial: the input as written, against the schema the model was shown
        (a server's recipe stands there as any ref does; its value is checked once resolved)."""
        if self._owner.policy.validation == "off" or tool.checks_input:
            return
        if server and self._owner.policy.refs:
            raw = {k: _A_REF if k in server and is_envelope(v) else v for k, v in raw.items()}
        validator = tool.declared_validator() if self._owner.policy.refs else tool.plain_validator()
        error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
        if error is None:
            return
        at = clip("/".join(str(p) for p in error.absolute_path), 200) or "the input"
        message = clip(error.message, 400)
        text = (f"Tool {tool.name!r} was not executed: its input does not fit its schema at "
                f"{at!r}: {message}.")
        if self._owner.policy.validation == "enforce":
            raise Refusal(text, "invalid-input", detail=message)
        self._owner.emit("refused", op="validate", tool=tool.name, reason="invalid-input",
                  detail=message, enforced=False)

    def _wants(self, tool: Tool, raw: dict[str, Any], call_seq: int) -> dict[str, ArtifactMeta]:
        if not tool.wants:
            return {}
        owner = self._owner
        assert owner.store is not None  # checked when the dispatcher was built
        try:
            return redeem(tool, raw, store=owner.store, scope=owner.scope,
                          resolver=owner.resolver, call_seq=call_seq,
                          cap=owner.caps.validation)
        except WantsRefusal as refusal:
            raise Refusal(refusal.text, refusal.reason, ref=refusal.ref,
                          detail=refusal.detail) from None

    def _arguments(self, tool: Tool, raw: dict[str, Any], call_seq: int,
                   server: frozenset[str] = frozenset()) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for name, value in raw.items():
            if self._owner.policy.refs and name not in tool.wants and is_envelope(value):
                value = self._resolve(tool, f"argument {quote(name)}", value, call_seq,
                                      lazy=name in tool.lazy, server=name in server)
            args[name] = value
        try:
            return tool.convert(args)
        except RefRefusal as exc:
            raise Refusal(str(exc), "invalid-arguments") from exc

    def _resolve(self, tool: Tool, what: str, value: Any, call_seq: int, *, lazy: bool,
                 server: bool = False) -> Any:
        try:
            ref = _pin(self.parse_ref(value, server), call_seq)
            return ref if lazy else self._owner.resolver.value(ref, current_seq=call_seq)
        except RefRefusal as exc:
            raise Refusal(
                f"Tool {tool.name!r} did not run: {what} is a reference that cannot be used. "
                f"{exc}", "bad-ref",
            ) from exc


_A_REF: dict[str, Any] = {ENVELOPE_KEY: {"type": "Message", "part": 0}}
"""What a server's recipe stands as for the schema check: a ref, as the schema admits one."""


def _pin(ref: Ref, current: int) -> Ref:
    """Give a Message ref written without `seq` (or as a handle) its seq, as read in the turn
    it was written in."""
    if isinstance(ref, MessageRef):
        return ref.at(current)
    if isinstance(ref, Blob) and ref.source is not None:
        return Blob(source=_pin(ref.source, current))
    if isinstance(ref, JsonPointer):
        return JsonPointer(_pin(ref.source, current), ref.path)
    if isinstance(ref, JsonQuery):
        return JsonQuery(_pin(ref.source, current), ref.path, ref.filter)
    return ref
