"""The HTTP lane's parse and answer against the SDK's own, by hypothesis: a request the lane
routes is one the SDK's entry parses to the same id, method, params and `_meta`; the lane's
answer is the SDK's response bytes and headers for any result."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server._streamable_http_modern import _is_notification_shaped, _write
from mcp.server.runner import _extract_meta
from pydantic import ValidationError
from starlette.requests import Request

from _tiers import examples
from byref.gateway.edge.lanes.http import HttpLane, _answer, _first_values

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)
IDS = st.one_of(st.integers(min_value=-(1 << 70), max_value=1 << 70), st.text(max_size=5),
                st.booleans(), st.floats(), st.none())
CAPABILITIES = st.just({}) | st.fixed_dictionaries(
    {}, optional={"sampling": st.just({}), "experimental": JSON}) | JSON
ENVELOPE = st.fixed_dictionaries({
    types.PROTOCOL_VERSION_META_KEY: st.just("2026-07-28"),
    types.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES}, optional={
    types.CLIENT_INFO_META_KEY: st.fixed_dictionaries(
        {"name": st.text(max_size=3), "version": st.text(max_size=3)}) | JSON,
    "progressToken": st.integers() | st.text(max_size=3)})
ODD_ENVELOPE = st.fixed_dictionaries({}, optional={
    types.PROTOCOL_VERSION_META_KEY: st.sampled_from(["2026-07-28", "2025-11-25", "x"]) | JSON,
    types.CLIENT_INFO_META_KEY: JSON, types.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES})
PARAMS = st.fixed_dictionaries({"name": st.sampled_from(["call_tool", "echo"]),
                                "_meta": ENVELOPE}, optional={
    "arguments": st.dictionaries(st.text(max_size=3), JSON, max_size=3)}) | (
    st.fixed_dictionaries({}, optional={
        "name": st.sampled_from(["call_tool", "echo"]) | JSON,
        "arguments": st.dictionaries(st.text(max_size=3), JSON, max_size=3) | JSON,
        "_meta": ENVELOPE | ODD_ENVELOPE | JSON, "surplus": JSON}) | JSON)
WELL_FORMED = st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": st.one_of(
    st.integers(min_value=-(1 << 64), max_value=1 << 64), st.text(max_size=5), IDS),
                                     "method": st.just("tools/call"), "params": PARAMS})
MESSAGES = WELL_FORMED | st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON, "id": IDS,
    "method": st.sampled_from(["tools/call", "tools/list"]) | JSON, "params": PARAMS,
    "extra": JSON})

def _request(message: Any) -> Request:
    params = message.get("params") if isinstance(message, dict) else None
    name = params.get("name") if isinstance(params, dict) else None
    headers = [(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/call")]
    if isinstance(name, str):
        headers.append((b"mcp-name", name.encode()))
    return Request({"type": "http", "method": "POST", "headers": headers, "path": "/mcp"})


@settings(max_examples=examples(400), deadline=None)
@given(message=MESSAGES)
def test_a_routed_request_is_parsed_alike_by_the_sdks_entry(message: Any) -> None:
    lane = HttpLane.__new__(HttpLane)
    lane._kept = None
    for _ in range(2):  # the second time from the kept envelope
        routed = lane._routed(_request(message), message)
        if routed is None:
            return
        rid, params, _verdict, meta = routed
        assert not _is_notification_shaped(message)
        try:
            req = types.JSONRPCRequest.model_validate(message)
        except ValidationError as exc:  # pragma: no cover - the failure this test exists for
            raise AssertionError(f"the lane routed what the SDK refuses: {message!r}") from exc
        assert (req.id, type(req.id), req.method, req.params) == (rid, type(rid), "tools/call",
                                                                  params)
        assert meta == _extract_meta(params), message


@settings(max_examples=examples(200), deadline=None)
@given(raw=st.lists(st.tuples(st.sampled_from([b"mcp-name", b"accept", b"x-a", b"mcp-method"]),
                              st.binary(max_size=4)), max_size=8))
def test_the_headers_the_ladder_sees_are_the_sdks(raw: list[tuple[bytes, bytes]]) -> None:
    request = Request({"type": "http", "method": "POST", "headers": raw, "path": "/mcp"})
    assert _first_values(request) == dict(request.headers)


def test_a_plain_call_is_routed() -> None:  # the property above is not vacuous
    lane = HttpLane.__new__(HttpLane)
    lane._kept = None
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "_meta": {types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
                                  types.CLIENT_CAPABILITIES_META_KEY: {}}}}
    assert lane._routed(_request(message), message) is not None


def _sent(coro: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        messages.append(message)

    async def receive() -> Any:  # pragma: no cover - nothing reads the request here
        raise AssertionError("no receive expected")

    asyncio.run(coro(send, receive))
    return messages


@settings(max_examples=examples(300), deadline=None)
@given(out=st.dictionaries(st.text(), JSON, max_size=5),
       rid=st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1) | st.text(max_size=5))
def test_the_lanes_answer_is_the_sdks_bytes(out: dict[str, Any], rid: Any) -> None:
    scope = {"type": "http"}
    ours = _sent(lambda send, receive: _answer(rid, out, scope, receive, send))
    theirs = _sent(lambda send, receive: _write(
        types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=out), scope, receive, send))
    assert ours == theirs, (rid, out)
