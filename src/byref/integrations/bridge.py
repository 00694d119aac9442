"""`Bridge`: byref's dispatcher, transcript, store and discovery behind a framework's tool calls.

Framework-free: each integration module converts its framework's tools, calls and messages to
the plain values this takes. A framework tool is adopted as a byref `Tool` whose body relays to
the framework's own execution of the call, so `$ref` arguments are resolved to exact values before
the framework runs the tool, and the result is placed (stored with a preview) or marked (a
binary) on the way back. Built-in read tools are added, declared once a stored result needs
them (read_result from the start under a budget, whose stubs name it); with a catalog,
search_tools and activate_tool declare the catalog's tools as the framework's history touches
them; with a budget, the framework's model input can be fitted (settled results become
exact-reread stubs). With `code_mode`, run_code is declared beside them: a sandboxed program that
calls byref's own tools (the catalog's, the readers) — not the framework's, which run only inside
the framework's own call of them.

The law of the record (a model turn's calls reserved as one batch, whatever order the
framework runs them in) is kept by `byref.integrations.turns.TurnRecord`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar, Unpack

from byref.context import Assembled, ContextAssembler, RequestBudget
from byref.discovery import Catalog, Discovery
from byref.discovery.declaring.declare import PLAIN
from byref.discovery.declaring.workingset import DEFAULT_BUDGET, working_set
from byref.dispatch import Call, Policy
from byref.dispatch.grounds import Grounds
from byref.errors import InvalidValue, MisuseError
from byref.events import Emitter
from byref.harness.options import Hosting, Limits
from byref.harness.session import SYSTEM_NOTE, Session, Surface
from byref.integrations.turns import Batch, TurnRecord
from byref.store import ArtifactStore, Scope
from byref.tools import Payload, Tool, builtin_tools
from byref.tools.code_mode.run_code import RUN_CODE, CodeMode
from byref.tools.readers.builtins import readers_for
from byref.tools.readers.read_result import READ_RESULT_NAME
from byref.transcript import Part, Transcript

R = TypeVar("R")
Execute = Callable[[dict[str, Any]], Awaitable[Any]]
"""The framework's own run of one call, given the resolved arguments."""

_current: ContextVar[Execute | None] = ContextVar("byref_framework_call", default=None)


@dataclass(frozen=True, slots=True)
class Seen:
    """One tool event of a framework's message history, as the working-set projection reads it:
    a call (its id, tool name and arguments) or a result (its call id and whether it failed)."""

    kind: Literal["call", "result"]
    call_id: str
    name: str = ""
    input: Any = None
    is_error: bool = False


class _Relay:
    """A framework tool's body as byref sees it: the framework's run of the current call."""

    def __init__(self, name: str, convert: Callable[[Any], Any]) -> None:
        self.name = name
        self.convert = convert

    async def __call__(self, **args: Any) -> Any:
        execute = _current.get()
        if execute is None:
            raise MisuseError(f"Tool {self.name!r} belongs to its framework and runs only inside "
                               "that framework's tool call.")
        return self.convert(await execute(args))


def plain_result(value: Any) -> Any:
    """Framework-neutral result conversion: bytes become a stored binary (a Payload)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return Payload.from_bytes(bytes(value))
    return value


class BridgeOptions(TypedDict, total=False):
    """What every integration takes and hands to its `Bridge` (each defaults as `Bridge` does).

    `store` ("memory": its own; None: nothing stored), `scope`, `policy`, `emit`; `catalog`
    (tools found by search_tools, declared while the working set holds them) or `search=True`
    (the framework's own tools behind search), `working_set` (how many), `budget` (fit the
    framework's model input to this many bytes), `code_mode` (True or a `CodeMode`: declare
    run_code, whose programs call byref's own tools)."""

    store: ArtifactStore | Literal["memory"] | None
    scope: Scope | None
    policy: Policy | None
    emit: Emitter | None
    catalog: Catalog | None
    search: bool
    working_set: int
    budget: RequestBudget | int | None
    code_mode: CodeMode | bool


def bridge_from(bridge: Bridge | None, options: BridgeOptions) -> Bridge:
    """The integration's bridge: the one given, or a new one from `options` (not both)."""
    if bridge is None:
        return Bridge(**options)
    if options:
        raise InvalidValue(f"Pass bridge= or the bridge's options, not both; got bridge= and "
                           f"{sorted(options)!r}.")
    return bridge


class Bridge:
    """byref for a framework's tool calls: `adopt` its tools, `surface` what to declare,
    `await call(...)` each call the framework routes, `fit` its model input to a budget.
    Takes the `BridgeOptions`."""

    def __init__(self, **options: Unpack[BridgeOptions]) -> None:
        unknown = sorted(set(options) - set(BridgeOptions.__annotations__))
        if unknown:
            raise InvalidValue(f"Unknown option(s) {unknown!r}; byref's integrations take "
                               f"{sorted(BridgeOptions.__annotations__)!r} (and bridge=).")
        store = options.get("store", "memory")
        scope, emit, catalog = options.get("scope"), options.get("emit"), options.get("catalog")
        search = options.get("search", False)
        working_set = options.get("working_set", DEFAULT_BUDGET)
        budget = options.get("budget")
        grounds = Grounds.make(store=store, scope=scope, policy=options.get("policy"), emit=emit)
        policy, own_store, scope, emit = grounds.policy, grounds.store, grounds.scope, grounds.emit
        self.limits = policy.read_limits()
        self.assembler = (ContextAssembler(budget, store=own_store, scope=scope, emit=emit)
                          if budget is not None else None)
        self.assembled: list[Assembled[Any]] = []
        """One entry per fitted request: its bytes and which groups it replaced."""
        self.search = search
        if search and catalog is None:
            catalog = Catalog()
        self.catalog = catalog
        self.discovery = (Discovery(catalog, budget=working_set, emit=emit)
                          if catalog is not None else None)
        builtins: tuple[Tool, ...] = ()
        if policy.refs and (own_store is not None or self.assembler is not None):
            room = self.assembler.room if self.assembler is not None else None
            builtins = builtin_tools(self.limits, room, present=False)
        self.builtins = builtins
        self._adopted: dict[str, tuple[tuple[str, str], Tool]] = {}
        code_mode = options.get("code_mode", False)
        mode = None
        if code_mode:
            base = code_mode if isinstance(code_mode, CodeMode) else CodeMode()
            mode = dataclasses.replace(base, refuse=self._code_gate(base.refuse))
        # byref's own half is a Session (transcript, store, scope, dispatcher): the framework's
        # tools join its dispatcher as they are adopted.
        self.session = Session(store=own_store, scope=scope, policy=policy, emit=emit,
                               discovery=self.discovery, code_mode=mode or False,
                               limits=Limits(read_limits=self.limits),
                               hosting=Hosting(readers=builtins))
        self.policy = self.session.policy
        self.transcript = self.session.transcript
        self.store = self.session.store
        self.scope = self.session.scope
        self.dispatcher = self.session.dispatcher
        self.code: tuple[Tool, ...] = (
            (self.dispatcher.tools[RUN_CODE],) if mode is not None else ())
        """run_code, declared beside the readers, when code mode is on."""
        self.turns = TurnRecord(self.transcript, self.dispatcher)

    def _code_gate(self, then: Callable[[Tool], str | None] | None
                   ) -> Callable[[Tool], str | None]:
        def refuse(tool: Tool) -> str | None:
            if tool.name in self._adopted:
                return (f"Tool {tool.name!r} was not called: it belongs to the framework and "
                        "runs only in the framework's own call of it, not from code; call it "
                        "yourself.")
            return then(tool) if then is not None else None
        return refuse

    # -- tools ---------------------------------------------------------------------------------
    @property
    def system(self) -> str:
        """The sentence on references for the system text (byref's `Session.system`)."""
        return SYSTEM_NOTE

    def adopt(self, name: str, description: str, schema: dict[str, Any], *,
              convert: Callable[[Any], Any] = plain_result) -> Tool:
        """The byref `Tool` for a framework tool (the same object while its text and schema are
        unchanged, so its rewritten schema and declaration stay byte-identical). With `search`,
        it is kept behind search_tools in the catalog."""
        key = (description, _schema_key(schema))
        held = self._adopted.get(name)
        if held is not None and held[0] == key:
            return held[1]
        if name in self.dispatcher.tools and held is None:
            raise InvalidValue(f"The framework tool {name!r} has the name of a byref tool; rename "
                             "it (byref's read and search tools keep their names).")
        tool = Tool(name=name, description=description, fn=_Relay(name, convert),
                    input_schema=schema)
        self._adopted[name] = (key, tool)
        self.dispatcher.tools[name] = tool
        if self.search and self.catalog is not None and name not in self.catalog:
            self.catalog.add(tool)
        return tool

    def own_tools(self) -> list[Tool]:
        """The tools byref runs itself: the readers, search_tools / activate_tool and the
        catalog's tools, name-sorted."""
        return sorted((t for n, t in self.dispatcher.tools.items() if n not in self._adopted),
                      key=lambda t: t.name)

    def is_byref(self, name: str) -> bool:
        """A tool byref runs itself (a read or search tool, or one from the catalog)."""
        return name in self.dispatcher.tools and name not in self._adopted

    def surface(self, visible: Iterable[str], seen: Iterable[Seen] = ()) -> Surface:
        """Declarations for the next request: the built-in tools, the adopted tools named in
        `visible` and, with a catalog, search_tools / activate_tool plus the working set
        projected from `seen` (the framework's history), with the discovery lines."""
        visible = [n for n in visible if n in self._adopted]
        seen = list(seen)
        # The readers, callable throughout, are declared once a stored result needs them.
        due = self._due(seen)
        if self.assembler is not None:  # a budget's stubs name read_result from any turn
            due |= {READ_RESULT_NAME}
        readers = [t for t in self.builtins if t.name in due]
        readers = [*readers, *self.code]  # declared from the start
        if self.discovery is None:
            chosen = {t.name: t for t in readers}
            chosen.update((n, self._adopted[n][1]) for n in visible)
            declared = [self._declare(chosen[n]) for n in sorted(chosen)]
            return Surface(tuple(declared), (self.system,) if self.policy.refs else ())
        always = [*readers, *self.discovery.tools,
                  *(self._adopted[n][1] for n in visible if not self.search)]
        listed = self.discovery.declare(always, self.project(seen), refs=self.policy.refs)
        lines = (self.system, *listed.system_lines) if self.policy.refs else tuple(
            listed.system_lines)
        return Surface(tuple(listed.declarations), lines)

    def _due(self, seen: Sequence[Seen]) -> frozenset[str]:
        """The readers the history's stored results need (`readers_for` of what byref
        recorded for each result the framework shows)."""
        due: frozenset[str] = frozenset()
        for event in seen:
            if event.kind == "result" and not event.is_error:
                recorded = self.turns.results.get(event.call_id)
                if recorded is not None:
                    due |= readers_for(recorded)
        return due

    def _declare(self, tool: Tool) -> dict[str, Any]:
        if self.policy.refs and tool.name not in PLAIN:
            return tool.declaration()
        return tool.plain_declaration()

    def working_set(self, seen: Iterable[Seen]) -> list[str]:
        """Catalog tools the history `seen` keeps declared, most recently touched first."""
        if self.discovery is None:
            return []
        return working_set(self.project(seen), self.discovery.catalog,
                           budget=self.discovery.budget)

    def recorded(self) -> list[Seen]:
        """byref's own record of the calls it dispatched, as history events (for a framework
        whose tool hooks cannot see its message history)."""
        out: list[Seen] = []
        for message in self.transcript:
            for part in message.parts:
                if part.type == "tool_call":
                    value = part.value if isinstance(part.value, dict) else {}
                    out.append(Seen("call", part.call_id or "", part.tool or "",
                                    value.get("input")))
                elif part.type == "tool_result":
                    out.append(Seen("result", part.call_id or "", is_error=part.is_error))
        return out

    def project(self, seen: Iterable[Seen]) -> Transcript:
        """The framework's history as a transcript of calls and results (a projection's input);
        a result byref recorded brings what it stored (so the readers stay declared)."""
        out = Transcript()
        calls: list[Part] = []
        results: list[Part] = []
        for event in seen:
            if event.kind == "call":
                if results:
                    out.append("tool", results)
                    results = []
                calls.append(Part(type="tool_call", tool=event.name, call_id=event.call_id,
                                  value={"name": event.name, "id": event.call_id,
                                         "input": event.input}))
            else:
                if calls:
                    out.append("assistant", calls)
                    calls = []
                recorded = self.turns.results.get(event.call_id)
                results.append(recorded if recorded is not None and not event.is_error else Part(
                    type="tool_result", value=None, call_id=event.call_id,
                    is_error=event.is_error))
        for role, parts in (("assistant", calls), ("tool", results)):
            if parts:
                out.append(role, parts)  # type: ignore[arg-type]
        return out

    # -- calls ---------------------------------------------------------------------------------
    async def call(self, call_id: str, name: str, args: Any, execute: Execute | None = None, *,
                   siblings: Sequence[tuple[str, str, Any]] = ()) -> Part:
        """Dispatch one call the framework routed (`execute` runs an adopted tool the
        framework's way). `siblings`: (id, name, args) of every call of the same model turn,
        when the framework shows them. Never raises for anything the model wrote."""
        from anyio import to_thread

        this = Call(call_id, name, {} if args is None else args)
        while True:
            slot = self.turns.reserve(this, siblings)
            if isinstance(slot, tuple):
                break
            await to_thread.run_sync(slot.wait)
        batch, index = slot
        token = _current.set(execute)
        try:
            part = await self.dispatcher.adispatch(
                batch.calls[index], call_seq=batch.call_seq, seq=batch.call_seq + 1, part=index)
        finally:
            _current.reset(token)
        self._finish(batch, index, part)
        return part

    def settle(self) -> None:
        """Record the turn's calls the framework never made (call before the next request)."""
        self.turns.settle()

    def _finish(self, batch: Batch, index: int, part: Part) -> None:
        tool = self.dispatcher.tools.get(batch.calls[index].name)
        if self.assembler is not None and not (tool is not None and tool.explicit_read):
            # The turn's other results share the room a read in the same turn may use.
            self.assembler.room.consume(len((part.rendered or "").encode()))
        self.turns.finish(batch, index, part)

    # -- budgeted model input ------------------------------------------------------------------
    def fit(self, build: Callable[[Mapping[str, str], str | None], R],
            measure: Callable[[R], int]) -> R:
        """The framework's model input under the budget. `build(stubs, note)` makes it with the
        results of the call ids in `stubs` replaced by that text (and `note`, the live-handles
        line, added last when set); `measure` gives its UTF-8 bytes. Without a budget,
        `build({}, None)`. Raises `ContextBudgetError` when even the compacted input is over."""
        self.settle()
        if self.assembler is None:
            return build({}, None)
        messages = list(self.transcript)
        original = {(m.seq, j): p.rendered for m in messages for j, p in enumerate(m.parts)}

        def view_build(view: list[Any]) -> R:
            stubs: dict[str, str] = {}
            note = None
            for message in view:
                for j, p in enumerate(message.parts):
                    if p.type == "text":
                        note = str(p.value)
                    elif (p.type == "tool_result" and p.call_id is not None
                          and p.rendered != original.get((message.seq, j))):
                        stubs[p.call_id] = p.rendered or ""
            return build(stubs, note)

        assembled = self.assembler.assemble(messages, build=view_build, measure=measure)
        self.assembled.append(assembled)
        return assembled.request


def _schema_key(schema: dict[str, Any]) -> str:
    from byref.jsonview import dumps

    return dumps(schema)
