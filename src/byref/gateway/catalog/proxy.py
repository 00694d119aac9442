"""Proxied tools: an upstream server's tool as a foreign-schema `byref.tools.Tool`.

Owns what happens between dispatch and the upstream call. Dispatch does the rest of the pipeline
(parse, validate, record, place); every top-level argument is declared `anyOf: [original, $ref]`
and marked lazy, so the tool receives a ref as a `Ref` and delivers it here in the form the
upstream parameter declares. The law: a ref reaches the upstream exact — for a parameter typed
`string`, stored text is sent byte for byte (its stored bytes, not a re-encoding) and a structured
value is sent as its JSON text; for a file input (`x-mcp-file`, SEP-2631) the bytes go as a
`data:` URI; for any other parameter the resolved value is sent as is. A server that has the
`dev.byref/refs` extension places its own large results and announces their refs; the gateway
keeps its preview as the server wrote it and passes those refs back to that server untouched,
for the caller that received them only (a record in the caller's scope), instead of storing the
value a second time. Then the
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
from byref.extension.protocol import announced, blob_key
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
    envelope,
    is_envelope,
    parse_model_envelope,
)
from byref.resolve import BytesSource
from byref.store import PutOptions
from byref.tools import Tool, ToolContext, ToolRefusal, rewrite_schema

_FOLLOW = 3
MAX_ANNOUNCED = 64
"""The most refs one upstream result may announce for the gateway to pass back (the rest are
refused as absent if the model routes them)."""
FOREIGN_KIND = "refs/upstream/"
"""A record's kind naming a ref an upstream minted for the caller: this, `<server>/<key>`."""
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
        minted = [k for k in (blob_key(e.get("ref"))
                              for e in announced(result.meta)[:MAX_ANNOUNCED]) if k]
        if minted and ctx.store is not None:
            await anyio.to_thread.run_sync(self.remember, ctx, minted)
        return result_value(result, server=self.server, tool=self.tool)

    def remember(self, ctx: ToolContext, keys: list[str]) -> None:
        """Record, in the caller's scope, that this server minted `keys` (its own
        `dev.byref/refs` announcement): they are passed back to it as they are."""
        assert ctx.store is not None
        for key in keys:
            ctx.store.put(ctx.scope, b"", PutOptions(kind=self._foreign_kind(key)))

    def _foreign_kind(self, key: str) -> str:
        return f"{FOREIGN_KIND}{self.server}/{key}"

    def passes_through(self, ref: Ref, ctx: ToolContext) -> bool:
        """Whether `ref` is a Blob this server minted for this caller (so it resolves it)."""
        if not isinstance(ref, Blob) or ref.key is None or ctx.store is None:
            return False
        return bool(ctx.store.list(ctx.scope, self._foreign_kind(ref.key), limit=1))

    def delivered(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        """The arguments with each ref delivered as its upstream parameter declares (one the
        server minted itself, passed back to it as it is)."""
        props = self.schema.get("properties") or {}
        return {k: (envelope(v) if self.passes_through(v, ctx) else deliver(v, props.get(k), ctx))
                if _is_ref(v) else v for k, v in args.items()}

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
    if isinstance(prop, Mapping) and isinstance(prop.get(FILE_KEYWORD), Mapping):
        return file_input(src, prop[FILE_KEYWORD])
    if isinstance(src, BytesSource):
        if not _wants_text(prop):
            return ctx.resolver.value(Blob(key=src.meta.ref))
        src = b"".join(src.chunks())
    if isinstance(src, bytes):
        return _text(src)
    if _wants_text(prop) and not isinstance(src, str):
        return dumps(src)
    return src


FILE_KEYWORD = "x-mcp-file"
"""SEP-2356 / SEP-2631's mark of a file input: a URI string property."""


def file_input(src: Any, declared: Mapping[str, Any]) -> str:
    """A resolved ref for a file input (`x-mcp-file`), as the drafts name it: an RFC 2397
    `data:` URI of the exact bytes (stored bytes with their media type; a structured value as
    JSON). Refused in words when the input takes uploads only, or the value is over `maxSize`
    or of a media type it does not `accept`."""
    if isinstance(src, BytesSource):
        data, media = b"".join(src.chunks()), src.meta.media_type
    elif isinstance(src, bytes):
        data, media = src, "application/octet-stream"
    elif isinstance(src, str):
        data, media = src.encode(), "text/plain"
    else:
        data, media = dumps(src).encode(), "application/json"
    modes = declared.get("transferModes")
    if isinstance(modes, list) and "inline" not in modes:
        raise ToolRefusal(f"This file input takes {modes!r} transfers only; byref hands files "
                          "to servers inline (a data: URI), so it cannot fill it.", "invalid-input")
    limit = declared.get("maxSize")
    if isinstance(limit, int) and len(data) > limit:
        raise ToolRefusal(f"The file is {len(data):,} bytes; this file input takes at most "
                          f"{limit:,}.", "invalid-input")
    accept = declared.get("accept")
    if isinstance(accept, list) and accept and not any(
            isinstance(a, str) and (a == media or (a.endswith("/*") and media.startswith(a[:-1])))
            for a in accept):
        raise ToolRefusal(f"The file's media type {media!r} is not one this file input accepts "
                          f"({', '.join(map(str, accept))}).", "invalid-input")
    return f"data:{media};base64,{base64.b64encode(data).decode('ascii')}"


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
