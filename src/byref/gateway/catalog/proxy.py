"""Proxied tools: an upstream server's tool as a foreign-schema `byref.tools.Tool`.

Owns what happens between dispatch and the upstream call. Dispatch does the rest of the pipeline
(parse, validate, record, place); every top-level argument is declared `anyOf: [original, $ref]`
and marked lazy, so the tool receives a ref as a `Ref` and delivers it here in the form the
upstream parameter declares. The law: a ref reaches the upstream exact — for a parameter typed
`string`, stored text is sent byte for byte (its stored bytes, not a re-encoding) and a structured
value is sent as its JSON text; for any other parameter the resolved value is sent as is. Then the
arguments are checked against the upstream's own schema, so a mismatch is the gateway's clear
refusal rather than the upstream's guess. An upstream error result is a refusal in the server's
words, naming the server. Code mode receives a result's structuredContent
(`ProxiedTool.code_value`, from what `Passed` keeps for the call); the model and refs meet the
server's text. The upstream is awaited on the gateway's loop; only delivering a ref (which may
read the store) goes to a worker thread.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import jsonschema
import mcp_types as types

from byref.discovery.catalog.mcp import Listed
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.convert import capability, error_content, error_text, result_value
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.jsonview import dumps
from byref.refs import (
    Blob,
    JsonPointer,
    JsonQuery,
    MessageRef,
    Ref,
    is_envelope,
    parse_model_envelope,
)
from byref.resolve import BytesSource
from byref.tools import Tool, ToolContext, ToolRefusal, rewrite_schema

_FOLLOW = 3
Invoke = Callable[[str, str, dict[str, Any]], Awaitable[types.CallToolResult]]
"""(server, upstream tool name, arguments) → the upstream's result; raises `UpstreamError`.
Awaited on the gateway's event loop, where the upstream connections live."""


@dataclass(eq=False)
class ProxiedTool(Tool):
    """An upstream tool as a byref Tool. Its function is the upstream call itself (an `async def`
    taking the dispatch context: deliver the arguments' refs, check them against the upstream's
    own schema, call the server); this class adds only what the gateway reads of it — the
    server's names and schema, its MCP metadata — and that it checks its own input."""

    server: str = ""
    upstream_name: str = ""
    upstream_schema: dict[str, Any] = field(default_factory=dict)
    mcp_meta: dict[str, Any] = field(default_factory=dict)
    """The server's title, annotations, icons and `_meta` for this tool (passed to clients)."""

    def declaration(self) -> dict[str, Any]:
        """The byref declaration, with the server's MCP metadata under `mcp` (for
        `convert.mcp_tool`)."""
        out = super().declaration()
        if self.mcp_meta:
            out["mcp"] = self.mcp_meta  # read by `convert.mcp_tool` at the edge
        return out

    def plain_declaration(self) -> dict[str, Any]:
        """The declaration without `$ref` alternatives: the server's own schema (its
        `input_schema` has them written in)."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.upstream_schema}

    @property
    def checks_input(self) -> bool:
        """Always True: its function checks the delivered arguments itself."""
        # `_UpstreamCall.check` validates the delivered arguments against the upstream's own
        # schema, and whatever the declared schema (each parameter `anyOf: [original, $ref]`)
        # would rightly refuse, it refuses too: a value that is not a ref meets the same
        # subschema there, and a ref is checked as the value it delivers. Dispatch need not check
        # the same input twice.
        return True

    def code_value(self, value: Any, call_id: str | None) -> Any:
        """The upstream's structuredContent for this call when it sent one, else `value` (taken
        from what `Passed` keeps for the call; a tool with an outputSchema always sends it)."""
        fn = self.fn
        if not isinstance(fn, _UpstreamCall) or fn.passed is None:
            return value
        extras = fn.passed.take(call_id)
        if extras is None or extras.structured is None:
            return value
        return _unwrapped(extras.structured, [value] if isinstance(value, str) else [])

    def _validate_foreign(self, args: dict[str, Any]) -> dict[str, Any]:
        # `Tool.convert` would validate the arguments against `input_schema` (the rewritten
        # schema, refs as envelopes) once more after dispatch; the function's check after
        # delivery covers it (see `checks_input`). Convert's missing and unknown parameter checks
        # still run.
        return args


class _UpstreamCall:
    """The function of a proxied tool: `await call(ctx=..., **arguments)` delivers the refs,
    checks the upstream's schema and calls the server; the result's value. Raises ToolRefusal
    when the arguments do not fit, the upstream fails or it reports an error."""

    def __init__(self, name: str, listed: Listed, call_upstream: Invoke,
                 passed: Passed | None) -> None:
        self.name, self.server, self.tool = name, listed.server, listed.name
        self.schema = listed.input_schema
        self.call_upstream, self.passed = call_upstream, passed
        self._validator: jsonschema.Draft202012Validator | None = None

    async def __call__(self, ctx: ToolContext, **args: Any) -> Any:
        if any(_is_ref(v) for v in args.values()):
            # Delivering a ref reads the transcript or the store (files, a database): a thread.
            delivered = await anyio.to_thread.run_sync(self.delivered, args, ctx)
        else:
            delivered = args
        self.check(delivered)
        try:
            result = await self.call_upstream(self.server, self.tool, delivered)
        except UpstreamError as exc:  # the client's words: the class, no configured value
            raise ToolRefusal(exc.public, "upstream-failed") from exc
        if result.is_error:
            raise ToolRefusal(
                f"Server {self.server!r} tool {self.tool!r} reported an error: "
                f"{error_text(result)}", "upstream-error", result=error_content(result))
        if self.passed is not None:
            self.passed.keep(ctx.call_id, result)
        return result_value(result, server=self.server, tool=self.tool)

    def delivered(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        """The arguments with each ref delivered as its upstream parameter declares."""
        props = self.schema.get("properties") or {}
        return {k: deliver(v, props.get(k), ctx) if _is_ref(v) else v for k, v in args.items()}

    def check(self, args: dict[str, Any]) -> None:
        """Refuse arguments the upstream's own schema refuses, naming where."""
        if self._validator is None:
            self._validator = jsonschema.Draft202012Validator(self.schema)
        errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            at = "/".join(str(p) for p in first.path) or "the input"
            raise ToolRefusal(
                f"Tool {self.name!r} was not sent to server {self.server!r}: its arguments, with "
                f"references resolved, do not fit its schema at {at!r}: {first.message}.",
                "invalid-input")


def _unwrapped(structured: Any, texts: list[str]) -> Any:
    """`{"result": x}` as `x` when the one text block says `x` (the SDKs wrap a function's plain
    return value so, beside its text): a plain text tool's result stays its text."""
    if not (isinstance(structured, dict) and structured.keys() == {"result"} and len(texts) == 1):
        return structured
    inner = structured["result"]
    if isinstance(inner, str):
        return inner if inner == texts[0] else structured
    try:
        said = json.loads(texts[0])
    except ValueError:
        return structured
    return inner if said == inner else structured


def proxied_tool(name: str, listed: Listed, call_upstream: Invoke, *,
                 passed: Passed | None = None,
                 mcp_meta: dict[str, Any] | None = None) -> ProxiedTool:
    """The catalog tool for one upstream tool; its function calls the upstream."""
    schema = listed.input_schema
    props = schema.get("properties") or {}
    return ProxiedTool(
        name=name, description=listed.description,
        fn=_UpstreamCall(name, listed, call_upstream, passed),
        input_schema=rewrite_schema(schema), lazy=frozenset(props),
        capabilities=(capability(listed.server, listed),), wants_ctx=True,
        server=listed.server, upstream_name=listed.name, upstream_schema=schema,
        mcp_meta=dict(mcp_meta or {}),
    )


def _is_ref(value: object) -> bool:
    return isinstance(value, MessageRef | Blob | JsonPointer | JsonQuery)


def deliver(ref: Ref, prop: Mapping[str, Any] | None, ctx: ToolContext) -> Any:
    """The value a ref stands for, in the form the upstream parameter declares.

    A ref that lands on a recorded `$ref` (a placed result's `value`, say) is followed, a few
    hops at most, so a Message ref to a placed result means the stored value, not its address.
    """
    src = ctx.resolver.source(ref)
    for _ in range(_FOLLOW):
        if not is_envelope(src):
            break
        src = ctx.resolver.source(parse_model_envelope(src))
    if isinstance(src, BytesSource):
        if not _wants_text(prop):
            return ctx.resolver.value(Blob(key=src.meta.ref))
        src = b"".join(src.chunks())
    if isinstance(src, bytes):
        return _text(src)
    if _wants_text(prop) and not isinstance(src, str):
        return dumps(src)
    return src


def _wants_text(prop: Mapping[str, Any] | None) -> bool:
    if not isinstance(prop, Mapping):
        return False
    kind = prop.get("type")
    if kind == "string":
        return True
    if isinstance(kind, list):
        return kind == ["string"] or sorted(kind) == ["null", "string"]
    return False


def _text(data: bytes) -> str:
    """Stored bytes for a text parameter: UTF-8 as is; anything else base64 (as MCP sends it)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii")
