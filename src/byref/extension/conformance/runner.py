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
from pydantic import BaseModel, ConfigDict

from byref.battery import CaseResult, Report, format_report, outcome
from byref.errors import InvalidValue
from byref.extension.conformance.cases import (
    CORE_CASES,
    Case,
    CaseName,
    Kit,
    NotApplicable,
    Reply,
    Session,
)
from byref.extension.conformance.host_cases import HOST_CASES
from byref.extension.protocol import IDENTIFIER

CASES: tuple[Case, ...] = (*CORE_CASES, *HOST_CASES)
"""Every case, in the order the report lists them."""

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
    token: str | None = None
    """Over a URL: the bearer token every request carries."""
    other_token: str | None = None
    """Over a URL: a second owner's token (the other-owner cases); over stdio a second process
    is the other owner."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise InvalidValue("A refs battery target needs exactly one of command= or url=.")
        if self.command is not None and (self.token or self.other_token):
            raise InvalidValue(f"Target {self.name!r}: tokens are for a url= target; a stdio "
                               "server's owner is its process.")
        known = set(get_args(CaseName))
        for name, reason in self.declared.items():
            if name not in known:
                raise InvalidValue(f"Target {self.name!r} declares unknown case {name!r}; case "
                                   f"names are: {', '.join(sorted(known))}.")
            if not reason.strip():
                raise InvalidValue(f"Target {self.name!r} declares {name!r} without a reason.")


def _capabilities(caps: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for where in ("experimental", "extensions"):
        value = getattr(caps, where, None)
        if isinstance(value, dict):
            found.update(value)
    return found


class _Answer(BaseModel):
    """Any request's result, every member kept as sent."""

    model_config = ConfigDict(extra="allow")


def _http(token: str | None) -> Any:
    """An HTTP client (the SDK's own, httpx2) sending `token` as its bearer, every wait bounded."""
    import httpx2

    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx2.AsyncClient(headers=headers, follow_redirects=True,
                              timeout=httpx2.Timeout(CALL_SECONDS))


@asynccontextmanager
async def connect(target: RefsTarget, *, declare: bool, other: bool = False
                  ) -> AsyncIterator[Session]:
    """One connection to the target as the official SDK's client, declaring the extension (or
    not), its capabilities read from `initialize` or `server/discover` (`other`: as the second
    owner, over a URL with `other_token`)."""
    from mcp.client import Client, advertise
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    server: Any
    if target.command is not None:
        argv = list(target.command)
        server = StdioServerParameters(command=argv[0], args=argv[1:],
                                       env={**os.environ, **(target.env or {})})
    else:
        assert target.url is not None
        token = target.other_token if other else target.token
        server = streamable_http_client(target.url, http_client=_http(token))
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

        async def request(method: str, params: dict[str, Any]) -> Reply:
            from mcp.shared.exceptions import MCPError

            sent = types.Request[dict[str, Any], str](method=method, params=params)
            try:
                with anyio.fail_after(CALL_SECONDS):
                    got = await client.session.send_request(
                        sent, _Answer, request_read_timeout_seconds=CALL_SECONDS)
            except MCPError as exc:
                return Reply(None, exc.error.code, exc.error.message)
            return Reply(dict(got.model_extra or {}), None, "")

        yield Session(call=call, list_tools=list_tools, capabilities=_capabilities(caps),
                      request=request)


async def fetch(target: RefsTarget, url: str, *, other: bool = False) -> tuple[int, bytes]:
    """GET `url` with the target's credentials (`other`: the second owner's): status, body."""
    token = target.other_token if other else target.token
    async with _http(token) as http:
        with anyio.fail_after(CALL_SECONDS):
            answer = await http.get(url)
            return answer.status_code, answer.content

async def run_case(case: Case, target: RefsTarget,
                   shared: Callable[[bool], Any] | None = None) -> CaseResult:
    """Run one case against the target and classify its outcome (`shared`: declare → an open
    session the run keeps, used unless a case asks for a fresh connection)."""
    started = time.perf_counter()

    def opener(*, declare: bool = True, fresh: bool = False) -> Any:
        if shared is not None and not fresh:
            return _borrowed(shared(declare))
        return connect(target, declare=declare, other=fresh)

    async def get(url: str, other: bool = False) -> tuple[int, bytes]:
        return await fetch(target, url, other=other)

    kit = Kit(open=opener, emit=target.emit, digest=target.digest, large=target.large,
              other_owner=target.command is not None or target.other_token is not None,
              fetch=get if target.url is not None else None)
    error: str | None
    try:
        await case.run(kit)
    except Exception as exc:  # a case fails by raising; so does a server that broke the wire
        leaf = _leaf(exc)
        if isinstance(leaf, NotApplicable):
            return CaseResult(case.name, case.law, "not-applicable", str(leaf),
                                  time.perf_counter() - started)
        error = f"{type(leaf).__name__}: {leaf}"
    else:
        error = None
    got, detail = outcome(error, target.declared.get(case.name))
    return CaseResult(case.name, case.law, got, detail, time.perf_counter() - started)


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
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
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
    return Report(target.name, tuple(results))


def format_refs_report(report: Report) -> str:
    """The report as text: one line a case, the law and reason under each that did not pass."""
    return format_report(report, f"{IDENTIFIER} conformance", detail_chars=500)
