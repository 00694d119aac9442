"""`Session`: byref inside your own model loop, in the provider's own shapes.

Owns one conversation's transcript, store, scope and dispatcher (and, optionally, discovery's
working set) for a caller who talks to the model with their own SDK code, and for byref's own
`Harness`, which is built on it. `declarations(provider)` gives the tool list in that
provider's shape (byte-stable turn after turn); `await handle(calls, provider)` takes that
provider's tool calls as the SDK returned them and answers its tool results, doing the seq/part
bookkeeping. The law: the calls of one turn run concurrently, and their results are recorded
and returned in call order; nothing a model writes raises out of `handle` (bad calls come back
as error results).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from byref.dispatch import Call, Dispatcher, Policy
from byref.dispatch.grounds import Grounds
from byref.dispatch.outbound.reflines import REFS_PROTOCOL, moved, without
from byref.dispatch.policy import EXPLICIT_READ_FRAME
from byref.errors import InvalidValue
from byref.events import Emitter
from byref.harness.options import AsyncLock, Hosting, Limits, legacy
from byref.reads import ReadLimits
from byref.refs import is_recipe
from byref.resolve import Caps
from byref.store import ArtifactStore, Scope
from byref.tools import Tool, builtin_tools
from byref.tools.code_mode.run_code import RUN_CODE, CodeMode, make_run_code_tool
from byref.tools.readers.builtins import readers_for
from byref.tools.sources import ToolSource, collect
from byref.transcript import Message, Part, Transcript

if TYPE_CHECKING:
    from byref.discovery import Discovery

T = TypeVar("T")
Provider = Literal["anthropic", "openai", "openai-chat", "mcp"]
PROVIDER_SHAPES: tuple[Provider, ...] = ("anthropic", "openai", "openai-chat", "mcp")

SYSTEM_NOTE = (REFS_PROTOCOL + " Read parts of a stored result with read_result, read_json "
               "or query_json.")
"""A sentence for your system prompt, so the model knows what a reference is."""

_RESULT_TRIES = 3
"""Conditional appends of a result to a shared record before its ref line is dropped."""

OnResult = Callable[[Call, Part], None]
"""Called with each result of a turn as it is recorded (in call order)."""


@dataclass(frozen=True, slots=True)
class Surface:
    """What the model is offered for the next request: byref-neutral declarations (`name`,
    `description`, `input_schema`) and the system lines to append (discovery's working-set
    line, the one that may vary, last)."""

    declarations: tuple[dict[str, Any], ...]
    system_lines: tuple[str, ...] = ()


class Session:
    """byref for a loop you write: `declarations(provider)`, then `await handle(calls, …)`.

    `tools` are `Tool`s or `ToolSource`s (their tools are listed once, here). With `discovery`,
    those are the scaffolding, always declared; the catalog's tools are declared while the
    working set holds them and are callable throughout. `code_mode` (True or a `CodeMode`)
    adds `run_code`, a sandboxed program that calls these tools through this session
    (`byref.tools.code_mode.run_code`). The built-in read tools (`Hosting.readers`) are
    callable throughout; each is declared from the first request after a stored result needs
    it (`readers_for`), so a conversation that stores nothing is never declared them. `limits`
    (`Limits`): ref-resolution caps and read limits; `hosting` (`Hosting`): for a host such as
    the gateway.
    """

    def __init__(self, tools: Sequence[Tool | ToolSource] = (), *,
                 store: ArtifactStore | Literal["memory"] | None = "memory",
                 scope: Scope | None = None, policy: Policy | None = None,
                 transcript: Transcript | None = None, emit: Emitter | None = None,
                 discovery: Discovery | None = None, code_mode: CodeMode | bool = False,
                 limits: Limits | None = None, hosting: Hosting | None = None,
                 caps: Caps | None = None, read_limits: ReadLimits | None = None,
                 readers: Sequence[Tool] | None = None, lock: AsyncLock | None = None,
                 unknown_tool: Callable[[str], str | None] | None = None) -> None:
        old = legacy("Session", {"caps": caps, "read_limits": read_limits, "readers": readers,
                                 "lock": lock, "unknown_tool": unknown_tool})
        limits = replace(limits or Limits(), **{k: v for k, v in old.items()
                                                if k in ("caps", "read_limits")})
        hosting = hosting or Hosting()
        if "unknown_tool" in old:
            hosting = replace(hosting, hooks=replace(hosting.hooks, unknown_tool=unknown_tool))
        hosting = replace(hosting, **{k: v for k, v in old.items() if k in ("readers", "lock")})
        caps, read_limits, readers = limits.caps, limits.read_limits, hosting.readers
        grounds = Grounds.make(store=store, scope=scope, policy=policy, emit=emit)
        self.policy, emit = grounds.policy, grounds.emit
        if read_limits is not None:
            # The explicit-read limit is the reads' dial; placement follows it for reads.
            self.policy = replace(self.policy, explicit_read_bytes=max(
                self.policy.explicit_read_bytes,
                read_limits.explicit_read_bytes + EXPLICIT_READ_FRAME))
        # One automatic-insertion dial: reads see the same value placement uses.
        self.read_limits = read_limits or self.policy.read_limits()
        self.transcript = transcript if transcript is not None else Transcript()
        # "memory" (the default) gives the session its own in-memory store; None runs storeless.
        self.store: ArtifactStore | None = grounds.store
        self.scope = grounds.scope
        declared = collect(tools)
        if code_mode and all(t.name != RUN_CODE for t in declared):
            # Code mode: one more tool, whose programs call the others through this session.
            declared.append(make_run_code_tool(
                mode=code_mode if isinstance(code_mode, CodeMode) else None))
        if readers is None:
            # A stored result's note names these readers: whoever can store, declares them.
            readers = (builtin_tools(self.read_limits)
                       if self.store is not None and self.policy.refs else ())
        have = {t.name for t in declared}
        # Readers the caller declared as tools of their own are theirs: always declared.
        self.readers: tuple[Tool, ...] = tuple(t for t in readers if t.name not in have)
        self._due = _DueReaders(self.readers)
        self.discovery = discovery
        self.scaffolding: list[Tool] = (
            [*declared, *discovery.tools] if discovery is not None else declared)
        mine = {t.name for t in declared} | {t.name for t in self.readers}
        callable_tools = [*self.scaffolding, *self.readers] + (
            [t for t in discovery.catalog.tools() if t.name not in mine]
            if discovery is not None else [])
        hooks = hosting.hooks
        if hooks.search is None and discovery is not None:
            hooks = replace(hooks, search=_catalog_search(discovery))
        self.dispatcher = Dispatcher(callable_tools, transcript=self.transcript,
                                     store=self.store, scope=self.scope, policy=self.policy,
                                     caps=caps, emit=emit, hooks=hooks)
        # Shared with whoever else writes this transcript (the gateway passes its scope's).
        self.lock: AsyncLock = hosting.lock if hosting.lock is not None else asyncio.Lock()

    # -- what the model is declared ------------------------------------------------------------
    @property
    def system(self) -> str:
        """A sentence to add to your system prompt: what a reference is and how to pass one."""
        return SYSTEM_NOTE

    def surface(self) -> Surface:
        """The neutral declarations and system lines for the next request. With discovery, the
        working set is projected from the transcript; live descriptions are refreshed."""
        due = self._due.of(self.transcript)
        if self.discovery is None:
            held = [t.name for t in self.readers if t.name not in due]
            return Surface(tuple(self.dispatcher.declarations(leave_out=held)))
        self.dispatcher.refresh()
        readers = [t for t in self.readers if t.name in due]
        declared = self.discovery.declare([*self.scaffolding, *readers], self.transcript,
                                           refs=self.policy.refs)
        return Surface(tuple(declared.declarations), tuple(declared.system_lines))

    def declarations(self, provider: Provider = "anthropic") -> list[dict[str, Any]]:
        """The tools in `provider`'s request shape, name-sorted and byte-stable."""
        shape = _provider(provider)
        return [_declare(d, shape) for d in self.surface().declarations]

    # -- recording the conversation ------------------------------------------------------------
    def user(self, text: str) -> Message:
        """Record the user's words (optional: refs address tool parts, not these)."""
        return self._due.note(self.transcript.append("user", [Part(type="text", value=text)]),
                              self.transcript)

    def assistant(self, parts: Sequence[Part]) -> Message:
        """Record the model's turn: its text parts and `dispatcher.call_part(call)` for each
        call, in the order the model wrote them. Its `seq` is the `call_seq` of `dispatch`."""
        return self._due.note(self.transcript.append(
            "assistant", list(parts) or [Part(type="text", value="")]), self.transcript)

    async def dispatch(self, calls: Sequence[Call], *, call_seq: int, concurrent: bool = True,
                       on_result: OnResult | None = None) -> list[Part]:
        """Run one turn's calls (recorded at `call_seq`) and record their results as the next
        message, in call order. Concurrent unless `concurrent=False` (then each call starts
        after the one before has been recorded by `on_result`)."""
        seq = call_seq + 1
        parts: list[Part]
        if concurrent and len(calls) > 1:
            parts = list(await asyncio.gather(*(
                self.dispatcher.adispatch(c, call_seq=call_seq, seq=seq, part=i)
                for i, c in enumerate(calls))))
            if on_result is not None:
                for c, p in zip(calls, parts, strict=True):
                    on_result(c, p)
        else:  # one call needs no task to run beside (a gather costs a task per call)
            parts = []
            for i, c in enumerate(calls):
                parts.append(await self.dispatcher.adispatch(c, call_seq=call_seq, seq=seq,
                                                             part=i))
                if on_result is not None:
                    on_result(c, parts[-1])
        if parts:
            self._due.note(self.transcript.append("tool", parts), self.transcript)
        return parts

    # -- one turn's tool calls, in a provider's shape ------------------------------------------
    async def handle(self, calls: Sequence[Any], provider: Provider = "anthropic"
                     ) -> list[dict[str, Any]]:
        """Run one model turn's tool calls (as the SDK returned them: objects or dicts) and
        answer their results in `provider`'s shape, in call order."""
        shape = _provider(provider)
        parsed = [_call(c, shape, i) for i, c in enumerate(calls)]
        if not parsed:
            return []
        call_seq = self.assistant([self.dispatcher.call_part(c) for c in parsed]).seq
        parts = await self.dispatch(parsed, call_seq=call_seq)
        return [_result(c, p, shape) for c, p in zip(parsed, parts, strict=True)]

    # -- one call as a turn of its own (the gateway's call sequence) -----------------------------
    async def run_call(self, call: Call, *, run: Call | None = None, exclusive: bool = True,
                       tries: int = 1) -> Part:
        """Run one call as a turn of its own and return its result part: `call` (as the client
        wrote it) recorded as an assistant message, `run` (default: `call`; the gateway passes
        the tool a `call_tool` names) dispatched, its result recorded as the next message.

        `exclusive` (a call whose result may name its own seq, as byref's readers' recipes do)
        records the call and its result under `self.lock`, so nothing lands between them; when
        another writer of a shared record came first, it runs again, at most `tries` times.
        Otherwise only each append waits, and only while an exclusive call holds the lock:
        other calls' messages may come between this call and its result, which names no seq."""
        target = call if run is None else run
        recorded = self.dispatcher.call_part(call)
        if exclusive:
            async with self.lock:
                for _ in range(max(1, tries)):
                    call_seq = (await self._append("assistant", recorded)).seq
                    part = await self.dispatcher.adispatch(target, call_seq=call_seq,
                                                           seq=call_seq + 1, part=0)
                    if await self._off_loop(self.transcript.append_at, call_seq + 1, "tool",
                                            [part]) is not None:
                        break
            return part
        call_seq = await self._append_when_free("assistant", recorded)
        part = await self.dispatcher.adispatch(target, call_seq=call_seq, seq=call_seq + 1,
                                               part=0)
        # Its rendering names no seq but its ref line's (no recipes; derived Blob refs are
        # seq-free), so it may land after other calls' messages, its line moved to where it
        # lands — but never between an exclusive call and its result.
        assert not any(is_recipe(r) for r in part.derived.values()), part.derived
        return await self._append_result(part)

    async def _append_result(self, part: Part) -> Part:
        """Record a non-exclusive call's result as the next message, its ref line naming the
        seq it lands at; returns the part as recorded. In memory nothing comes between reading
        the next seq and the append; a shared record is appended conditionally, a few times,
        and the line is dropped rather than left naming another message."""
        if not self.transcript.appends_wait and not self.lock.locked():
            landed = moved(part, self.transcript.next_seq, 0)
            self.transcript.append("tool", [landed])
            return landed
        async with self.lock:
            for _ in range(_RESULT_TRIES):
                seq = self.transcript.next_seq
                landed = moved(part, seq, 0)
                if await self._off_loop(self.transcript.append_at, seq, "tool",
                                        [landed]) is not None:
                    return landed
            landed = without(part)
            await self._append("tool", landed)
            return landed

    async def _append_when_free(self, role: Literal["assistant", "tool"], part: Part) -> int:
        """Record `part` as a message and return its seq; wait for the lock only while an
        exclusive call holds it (an append in memory never awaits: on the loop nothing comes
        between the check and the append). An append that waits on shared storage is made
        off the loop, so it holds the lock while it waits."""
        if self.transcript.appends_wait or self.lock.locked():
            async with self.lock:
                return (await self._append(role, part)).seq
        return self._due.note(self.transcript.append(role, [part]), self.transcript).seq

    async def _append(self, role: Literal["assistant", "tool"], part: Part) -> Message:
        return self._due.note(await self._off_loop(self.transcript.append, role, [part]),
                              self.transcript)

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)`, in a worker thread when the transcript's appends wait on shared storage
        (a replica's round trip to PostgreSQL would otherwise stall every session's loop)."""
        if self.transcript.appends_wait:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def handle_sync(self, calls: Sequence[Any], provider: Provider = "anthropic"
                    ) -> list[dict[str, Any]]:
        """`handle` for code without an event loop."""
        return run_blocking(self.handle(calls, provider), "session.handle_sync(...)",
                            "await session.handle(...)")


def _catalog_search(discovery: Discovery) -> Callable[[str, int], list[dict[str, Any]]]:
    """Code mode's `tools.search`: the catalog's own search, a row a tool."""
    def search(query: str, limit: int) -> list[dict[str, Any]]:
        page = discovery.searcher.search(query, limit=limit)
        return [{"name": r.name, "description": r.excerpt} for r in page.results]
    return search


class _DueReaders:
    """Which held-back readers the transcript's stored results have needed so far: folded
    forward over the messages appended since the last question (a name once due stays due, so
    the declarations change once, then stay byte-stable). The session hands over each message
    it appends (`note`), so only messages others appended are read back."""

    def __init__(self, readers: Sequence[Tool]) -> None:
        self._names = frozenset(t.name for t in readers)
        self._due: frozenset[str] = frozenset()
        self._folded = 0
        """How many of the session's messages have been looked at."""

    def note(self, message: Message, transcript: Transcript) -> Message:
        """Fold in `message`, just appended, if it is the next one unfolded; returns it."""
        if message.seq == transcript.origin + self._folded and self._due != self._names:
            for part in message.parts:
                self._due |= readers_for(part) & self._names
            self._folded += 1
        return message

    def of(self, transcript: Transcript) -> frozenset[str]:
        """The reader names due for the next request over the session's `transcript`."""
        if self._due == self._names:  # all due (or none held): nothing left to look for
            return self._due
        due = set(self._due)
        count = len(transcript)
        for index in range(self._folded, count):
            for part in transcript.message(transcript.origin + index).parts:
                due |= readers_for(part)
        self._due, self._folded = frozenset(due & self._names), count
        return self._due


_blocking = threading.local()


def run_blocking(coroutine: Coroutine[Any, Any, T], what: str, instead: str) -> T:
    """Run `coroutine` to completion from code without an event loop, or say what to call
    inside one. Every blocking call on a thread shares one event loop, kept open: an async SDK
    client's connection pool belongs to the loop it was first used on, so a fresh loop per
    call (`asyncio.run`) would break the second call through the same model."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coroutine.close()
        raise InvalidValue(f"{what} cannot run inside a running event loop; use {instead}.")
    runner: asyncio.Runner | None = getattr(_blocking, "runner", None)
    if runner is None:
        runner = _blocking.runner = asyncio.Runner()
        if threading.current_thread() is threading.main_thread():
            atexit.register(runner.close)
    return runner.run(coroutine)


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
