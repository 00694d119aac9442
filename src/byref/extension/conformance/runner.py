"""The refs battery's harness: a server by command (stdio) or URL, every case run, one report.

Owns `RefsTarget` (how to reach the server, its probe tools, its declarations), the connections a
case opens (the official SDK's client, declaring `dev.byref/refs` or not, in either protocol
generation), `run_refs_conformance` and `format_refs_report`. The law, as the store battery's
(`byref.battery`): no case quietly disappears — each is passed, failed, not-applicable (with the
reason) or declared (reported stale, which fails the report, once it passes); every connection is
bounded by `CONNECT_SECONDS` and every call by `CALL_SECONDS`.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import mcp_types as types

from byref.battery import Outcome, outcome
from byref.errors import InvalidValue
from byref.extension.conformance.cases import CASES, Case, CaseName, Kit, NotApplicable, Session
from byref.extension.protocol import IDENTIFIER

CONNECT_SECONDS = 60.0
"""How long a connection's handshake (and so a process's start) may take."""
CALL_SECONDS = 60.0
"""How long one call may take."""
LARGE_BYTES = 200_000
"""The size of the result every placing case asks for (well above any sane inlineBytes)."""


@dataclass(frozen=True)
class RefsTarget:
    """A server under the battery: `command` (argv, spoken to over stdio) or `url` (streamable
    HTTP), the names of its probe tools, the protocol generation, and declared cases."""

    name: str
    command: Sequence[str] | None = None
    url: str | None = None
    emit: str = "emit"
    digest: str = "digest"
    modern: bool = False
    """Speak 2026-07-28 (capabilities from `server/discover`); else the handshake era."""
    env: Mapping[str, str] | None = None
    large: int = LARGE_BYTES
    declared: Mapping[CaseName, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise InvalidValue("A refs battery target needs exactly one of command= or url=.")
        known = set(get_args(CaseName))
        for name, reason in self.declared.items():
            if name not in known:
                raise InvalidValue(f"Target {self.name!r} declares unknown case {name!r}; case "
                                   f"names are: {', '.join(sorted(known))}.")
            if not reason.strip():
                raise InvalidValue(f"Target {self.name!r} declares {name!r} without a reason.")


@dataclass(frozen=True)
class RefsCaseResult:
    """One case's outcome, with the law it holds and why it did not pass."""

    name: CaseName
    law: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """This result as JSON."""
        return {"case": self.name, "law": self.law, "outcome": self.outcome,
                "detail": self.detail, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class RefsReport:
    """Every case's result for one target."""

    target: str
    results: tuple[RefsCaseResult, ...]

    @property
    def ok(self) -> bool:
        """Whether no case failed or went stale."""
        return all(r.outcome not in ("failed", "stale") for r in self.results)

    def counts(self) -> dict[str, int]:
        """How many cases had each outcome."""
        out: dict[str, int] = {}
        for r in self.results:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out

    def outcomes(self) -> dict[str, str]:
        """Case name → outcome."""
        return {r.name: r.outcome for r in self.results}

    def to_json(self) -> dict[str, Any]:
        """The report as JSON: counts and every case."""
        return {"target": self.target, "ok": self.ok, "counts": self.counts(),
                "cases": [r.to_json() for r in self.results]}


def _capabilities(caps: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for where in ("experimental", "extensions"):
        value = getattr(caps, where, None)
        if isinstance(value, dict):
            found.update(value)
    return found


@asynccontextmanager
async def connect(target: RefsTarget, *, declare: bool) -> AsyncIterator[Session]:
    """One connection to the target as the official SDK's client, declaring the extension (or
    not), its capabilities read from `initialize` or `server/discover`."""
    from mcp.client import Client, advertise
    from mcp.client.stdio import StdioServerParameters

    server: Any
    if target.command is not None:
        argv = list(target.command)
        server = StdioServerParameters(command=argv[0], args=argv[1:],
                                       env={**os.environ, **(target.env or {})})
    else:
        server = target.url
    extensions = [advertise(IDENTIFIER, {})] if declare else None
    mode = "2026-07-28" if target.modern else "legacy"
    # The handshake is a request, so `read_timeout_seconds` bounds the start too.
    async with Client(server, mode=mode, extensions=extensions,
                      read_timeout_seconds=CONNECT_SECONDS) as client:
        if target.modern:
            with anyio.fail_after(CALL_SECONDS):
                # Asked on the wire: a pinned client's `discover()` answers a synthesized one.
                raw = await client.session.send_discover(client.protocol_version)
                caps = types.DiscoverResult.model_validate(raw).capabilities
        else:
            caps = client.server_capabilities

        with anyio.fail_after(CALL_SECONDS):  # as a client does first (a gateway's servers
            await client.list_tools()           # start meanwhile)

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            with anyio.fail_after(CALL_SECONDS):
                return await client.call_tool(
                    name, arguments, read_timeout_seconds=CALL_SECONDS)

        async def list_tools() -> list[Any]:
            with anyio.fail_after(CALL_SECONDS):
                return list((await client.list_tools()).tools)

        yield Session(call=call, list_tools=list_tools, capabilities=_capabilities(caps))

async def run_case(case: Case, target: RefsTarget,
                   shared: Callable[[bool], Any] | None = None) -> RefsCaseResult:
    """Run one case against the target and classify its outcome (`shared`: declare → an open
    session the run keeps, used unless a case asks for a fresh connection)."""
    started = time.perf_counter()

    def opener(*, declare: bool = True, fresh: bool = False) -> Any:
        if shared is not None and not fresh:
            return _borrowed(shared(declare))
        return connect(target, declare=declare)

    kit = Kit(open=opener, emit=target.emit, digest=target.digest, large=target.large,
              other_owner=target.command is not None)
    error: str | None
    try:
        await case.run(kit)
    except Exception as exc:  # a case fails by raising; so does a server that broke the wire
        leaf = _leaf(exc)
        if isinstance(leaf, NotApplicable):
            return RefsCaseResult(case.name, case.law, "not-applicable", str(leaf),
                                  time.perf_counter() - started)
        error = f"{type(leaf).__name__}: {leaf}"
    else:
        error = None
    got, detail = outcome(error, target.declared.get(case.name))
    return RefsCaseResult(case.name, case.law, got, detail, time.perf_counter() - started)


@asynccontextmanager
async def _borrowed(session: Awaitable[Session]) -> AsyncIterator[Session]:
    yield await session


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (task) groups: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def run_refs_conformance(
    target: RefsTarget, cases: Sequence[Case] = CASES,
    on_result: Callable[[RefsCaseResult], None] | None = None,
) -> RefsReport:
    """Run `cases` in order against the target (`on_result` told after each). The run keeps one
    connection that declares the extension and one that does not, opened when first asked for;
    a case that needs its own (another owner) opens it."""
    results = []
    async with AsyncExitStack() as stack:
        sessions: dict[bool, Session] = {}

        async def shared(declare: bool) -> Session:
            if declare not in sessions:
                sessions[declare] = await stack.enter_async_context(
                    connect(target, declare=declare))
            return sessions[declare]

        for case in cases:
            result = await run_case(case, target, shared)
            if on_result is not None:
                on_result(result)
            results.append(result)
    return RefsReport(target.name, tuple(results))


def format_refs_report(report: RefsReport) -> str:
    """The report as text: one line a case, the law and reason under each that did not pass."""
    marks = {"passed": "ok  ", "failed": "FAIL", "not-applicable": "n/a ", "declared": "decl",
             "stale": "STALE"}
    lines = [f"{IDENTIFIER} conformance: {report.target}"]
    for r in report.results:
        lines.append(f"  {marks[r.outcome]:5} {r.name}  ({r.seconds:.2f}s)")
        if r.outcome != "passed":
            lines.append(f"        law: {r.law}")
            if r.detail:
                lines.append(f"        why: {r.detail[:500]}")
    counts = ", ".join(f"{n} {k}" for k, n in sorted(report.counts().items()))
    lines.append(f"{'PASS' if report.ok else 'FAIL'}: {counts}")
    return "\n".join(lines)
