"""`Tool` and `@tool`: a callable plus what the model and the dispatcher need to know about it.

The law: a tool's input schema comes from its type hints (or is given verbatim for a foreign tool,
e.g. one behind MCP); arguments reach it resolved and converted to its declared types, except
parameters marked lazy, which receive the `Ref` itself so the tool can stream on its own terms.
A tool may be `async def`: `Dispatcher.adispatch` awaits it on the running loop, and the
synchronous path runs it to completion or refuses, never handing a coroutine on as a result.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints, overload

import jsonschema
import msgspec

from byref.errors import InvalidValue, RefusalReason, Refused
from byref.refs import KEY_PATTERN, RefRefusal, envelope, is_ref
from byref.tools.schema import SchemaCache, is_ref_annotation, schema_from_signature

if TYPE_CHECKING:
    from byref.tools.call_context import ToolContext

T = TypeVar("T")


class ToolInputError(RefRefusal):
    """Arguments do not fit the tool's schema; the text is shown to the model."""


_CODE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class ToolRefusal(Refused):
    """Raised by a tool body to decline: the text goes to the model as-is, marked as an error.

    `reason` is one of byref's closed set (`RefusalReason`); a tool's own code for why it
    declined (`code="quota-exceeded"`) rides beside it on the `refused` event, so third-party
    codes never widen byref's set and a dashboard can still group by either."""

    def __init__(self, text: str, reason: RefusalReason = "tool-refused", *,
                 code: str | None = None, result: str | None = None) -> None:
        super().__init__(text)
        if code is not None and not (isinstance(code, str) and _CODE.fullmatch(code)):
            raise InvalidValue(f"ToolRefusal code {code!r} is not a short slug; use lower-case "
                               "letters, digits, '.', '_' or '-' (at most 64), e.g. "
                               "'quota-exceeded'.")
        self.text = text
        self.reason = reason
        self.code = code
        self.result = result
        """The tool's own error content, when it ran and answered with one (an MCP server's
        `isError` result): recorded as the result's value, so its ref line passes those words
        on (`dispatch/outbound/reflines.py`); None for a decline, which has nothing to pass on."""


def artifact_ref_schema(kind: str) -> dict[str, Any]:
    """How a `wants` argument is declared: the ref of an artifact of `kind`."""
    return {"type": "string", "pattern": f"^{KEY_PATTERN}$",
            "description": f"The art_… ref of a {kind!r} artifact."}


@dataclass(eq=False)
class Tool:
    """A tool the model can call: name, description, function, input schema, and how dispatch
    treats its arguments and results."""
    name: str
    description: str
    fn: Callable[..., Any]
    input_schema: dict[str, Any]
    lazy: frozenset[str] = frozenset()
    literal: frozenset[str] = frozenset()
    """Parameters the model writes itself (a name, a count, a label): declared without the
    `$ref` alternative, so the schema check refuses a ref there."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    glossary: tuple[str, ...] = ()
    wants: Mapping[str, str] = field(default_factory=dict)
    """Argument name → artifact kind the argument must redeem to (checked at dispatch)."""
    result_kind: str | None = None
    ceiling: int | None = None
    """The author's own limit on result characters: a longer result is refused, not placed."""
    explicit_read: bool = False
    """An explicit read bounds its own answer (coverage-reported); placement uses the
    explicit-read limit for it instead of the automatic-insertion one."""
    ref_line: bool = True
    """Show the ref line under this tool's inline results (`byref.dispatch.outbound.reflines`);
    off for tools whose results are no data to pass on (discovery's search and activation)."""
    wants_ctx: bool = False
    calls_tools: bool = False
    """The tool calls other tools through `ctx.calls` (code mode's `run_code`)."""
    refresh: Callable[[], object] | None = None
    """Called before each declaration: lets a tool keep its description live (run_python)."""
    watchers: list[Callable[[Tool], None]] = field(default_factory=list, init=False, repr=False)
    """Called after the tool's description changes (a catalog re-indexes)."""
    _validator: jsonschema.Draft202012Validator | None = field(default=None, init=False,
                                                               repr=False)
    # The tool's own caches (rewritten schema, validators of what the model was shown): they
    # are released with the tool, never held process-wide.
    _schemas: SchemaCache = field(default_factory=SchemaCache, init=False, repr=False)
    _checkers: dict[int, tuple[dict[str, Any], jsonschema.Draft202012Validator]] = field(
        default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise InvalidValue(
                f"Tool name {self.name!r} must be letters, digits, '_' or '-' (providers reject "
                "other characters)."
            )
        unknown = sorted(set(self.lazy) - set(self.input_schema.get("properties", {})))
        if unknown:
            raise InvalidValue(f"Tool {self.name!r} marks unknown parameter(s) lazy: {unknown!r}.")
        unknown = sorted(set(self.literal) - set(self.input_schema.get("properties", {})))
        if unknown:
            raise InvalidValue(
                f"Tool {self.name!r} marks unknown parameter(s) literal: {unknown!r}.")
        unknown = sorted(set(self.wants) - set(self.input_schema.get("properties", {})))
        if unknown:
            raise InvalidValue(f"Tool {self.name!r} wants artifacts for unknown parameter(s) "
                             f"{unknown!r}.")

    @property
    def checks_input(self) -> bool:
        """The tool checks its own (delivered) arguments before it acts, refusing whatever
        dispatch's check against the declared schema would refuse: dispatch skips that check."""
        return False

    @property
    def required(self) -> tuple[str, ...]:
        """The schema's required argument names."""
        return tuple(self.input_schema.get("required", ()))

    def declaration(self) -> dict[str, Any]:
        """What the model is shown. The schema object is cached, so repeated calls are identical."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self._schemas.rewrite(self.input_schema, self.lazy | self.literal),
        }

    def declared_validator(self) -> jsonschema.Draft202012Validator:
        """A validator for the schema the model is declared (with `$ref` alternatives)."""
        return self._checker(self._schemas.rewrite(self.input_schema, self.lazy | self.literal))

    def plain_validator(self) -> jsonschema.Draft202012Validator:
        """A validator for the tool's own schema, as written."""
        return self._checker(self.input_schema)

    def _checker(self, schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
        hit = self._checkers.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = (schema, jsonschema.Draft202012Validator(schema))
            self._checkers[id(schema)] = hit
        return hit[1]

    def plain_declaration(self) -> dict[str, Any]:
        """The declaration without `$ref` alternatives (for a harness that does not pass refs)."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema}

    def convert(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check resolved arguments against the schema and convert them to the declared types."""
        props = self.input_schema.get("properties", {})
        extra = sorted(set(args) - set(props))
        if extra and self.input_schema.get("additionalProperties") is False:
            raise ToolInputError(
                f"Tool {self.name!r} has no parameter(s) {', '.join(map(repr, extra))}; its "
                f"parameters are: {', '.join(map(repr, props)) or 'none'}."
            )
        missing = [name for name in self.required if name not in args]
        if missing:
            raise ToolInputError(
                f"Tool {self.name!r} needs {', '.join(map(repr, missing))}; pass a value or a "
                "$ref for each."
            )
        if not self.annotations:
            return self._validate_foreign(args)
        out: dict[str, Any] = {}
        for name, value in args.items():
            if name in self.lazy or name not in self.annotations:
                out[name] = value
                continue
            try:
                out[name] = msgspec.convert(value, self.annotations[name], strict=False)
            except msgspec.ValidationError as exc:
                raise ToolInputError(
                    f"Argument {name!r} of tool {self.name!r} does not fit its schema: {exc}."
                ) from exc
        return out

    def _validate_foreign(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._validator is None:
            self._validator = jsonschema.Draft202012Validator(self.input_schema)
        validator = self._validator
        # A lazy argument holds a Ref object; check it in the form the model wrote it.
        checked = {k: envelope(v) if k in self.lazy and is_ref(v) else v for k, v in args.items()}
        errors = sorted(validator.iter_errors(checked), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            at = "/".join(str(p) for p in first.path) or "the input"
            raise ToolInputError(
                f"Input to tool {self.name!r} does not fit its schema at {at!r}: {first.message}."
            )
        return args

    def code_value(self, value: Any, call_id: str | None) -> Any:
        """What a program in code mode receives for this tool's inline result `value` (its
        recorded value, as here); an upstream's tool gives the structured value it sent."""
        return value

    @property
    def is_async(self) -> bool:
        """Its function is `async def`: dispatch awaits it (`Dispatcher.adispatch`)."""
        fn = self.fn
        # An instance whose __call__ is async counts too (its class attribute says so).
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

    def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool to completion from synchronous code (see `run_awaitable`)."""
        value = self._call(args, ctx)
        return run_awaitable(self.name, value) if inspect.isawaitable(value) else value

    async def ainvoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool on the running event loop, awaiting what an async function returns."""
        value = self._call(args, ctx)
        return await value if inspect.isawaitable(value) else value

    def _call(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if self.wants_ctx:
            return self.fn(**args, ctx=ctx)
        return self.fn(**args)


def run_awaitable(tool: str, awaitable: Awaitable[T]) -> T:
    """Finish an async tool's awaitable from synchronous code, never handing back a coroutine.

    In an anyio worker thread it runs on that thread's event loop (where the tool's clients and
    connections live); with no loop at all, on a fresh one. Inside a running loop it cannot be
    waited for without blocking that loop, so it is refused in words naming the fix.
    """

    async def finish() -> T:
        started.append(True)
        return await awaitable

    started: list[bool] = []
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never started: no "was never awaited" warning
        raise ToolRefusal(
            f"Tool {tool!r} is async and was dispatched synchronously inside a running event "
            "loop, so it did not run; the application should use `await "
            "Dispatcher.adispatch(...)`.", "tool-error")
    try:
        from anyio import NoEventLoopError, from_thread
    except ImportError:  # no anyio (it comes with the `mcp` extra): no anyio worker threads
        return asyncio.run(finish())
    try:
        return from_thread.run(finish)
    except NoEventLoopError:
        if started:
            raise  # the tool's own
    return asyncio.run(finish())


@overload
def tool(fn: Callable[..., Any]) -> Tool: ...


@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    lazy: tuple[str, ...] = (),
    capabilities: tuple[str, ...] = (),
    domains: tuple[str, ...] = (),
    entities: tuple[str, ...] = (),
    glossary: tuple[str, ...] = (),
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    ceiling: int | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    lazy: tuple[str, ...] = (),
    capabilities: tuple[str, ...] = (),
    domains: tuple[str, ...] = (),
    entities: tuple[str, ...] = (),
    glossary: tuple[str, ...] = (),
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    ceiling: int | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorate a function to make it a `Tool`; the schema comes from its type hints."""

    def build(f: Callable[..., Any]) -> Tool:
        lazy_set = frozenset(lazy)
        hints = get_type_hints(f)
        params = inspect.signature(f).parameters
        annotations = {
            n: hints[n] for n in params if n != "ctx" and n in hints
        }
        for n in lazy_set:
            if n not in annotations:
                raise InvalidValue(f"Lazy parameter {n!r} is not a parameter of {f.__name__!r}.")
        doc = _one_paragraph_per_line(inspect.getdoc(f) or "")
        schema = schema_from_signature(f, lazy_set)
        for arg, kind in (wants or {}).items():
            if arg in schema["properties"]:
                # The model passes the ticket; the handler receives what it redeems to.
                schema["properties"][arg] = artifact_ref_schema(kind)
        return Tool(
            name=name or f.__name__,
            description=description or doc,
            fn=f,
            input_schema=schema,
            lazy=lazy_set | frozenset(n for n, a in annotations.items() if is_ref_annotation(a)),
            annotations=annotations,
            capabilities=capabilities, domains=domains, entities=entities, glossary=glossary,
            wants=dict(wants or {}), result_kind=result_kind, ceiling=ceiling,
            wants_ctx="ctx" in params,
        )

    if fn is not None:
        return build(fn)
    return build


def _one_paragraph_per_line(doc: str) -> str:
    # Docstrings wrap at the source's line length; the model should see whole sentences.
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)
