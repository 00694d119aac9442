"""What the stdio lane (`stdio.py`) takes off the line, against the SDK's own parse: a line the
lane takes is one the SDK's reader parses into that very `tools/call` request (same id, of the same
type, same params) with the same `_meta` the SDK's runner lifts from it; the lane's answer bytes
are the SDK's response model dumped as the SDK's writer dumps it; before the SDK's loop has served
a request, nothing is taken."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import _extract_meta

from _tiers import examples
from byref.gateway.edge.lanes.fastpath import PlainCalls
from byref.gateway.edge.lanes.stdio import StdioLane
from byref.gateway.wire.stdio import MessageWriter

V = types.PROTOCOL_VERSION_META_KEY
CAPS, INFO = types.CLIENT_CAPABILITIES_META_KEY, types.CLIENT_INFO_META_KEY


class _Seen:
    """The two fields of a request context `StdioLane.seen` reads."""

    def __init__(self, version: str) -> None:
        self.protocol_version, self.lifespan_context = version, None


async def _never(*_args: Any) -> Any:
    raise AssertionError("nothing runs here")


def _lane(era: str | None) -> StdioLane:
    server: Server[Any] = Server("lane-parse")
    plain = PlainCalls(server, _never, _never, lambda _ctx: None)
    server.middleware.append(plain)
    lane = StdioLane(server, plain, MessageWriter())
    lane._tg = object()  # type: ignore[assignment]  # never started: `_context` is what is tested
    if era == "legacy":
        connection = Connection.for_loop(MessageWriter())  # type: ignore[arg-type]
        connection.initialized.set()
        lane.seen(_Seen("2025-11-25"), connection)  # type: ignore[arg-type]
    elif era == "modern":
        lane.seen(_Seen("2026-07-28"), Connection.from_envelope("2026-07-28", None, {}))  # type: ignore[arg-type]
    return lane


LANES = {era: _lane(era) for era in ("legacy", "modern")}

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8)
envelopes = st.fixed_dictionaries(
    {V: st.sampled_from(["2026-07-28", "2025-11-25", "1999-01-01"]) | json_scalars},
    optional={CAPS: st.just({}) | st.just({"sampling": {}}) | json_values,
              INFO: st.just({"name": "c", "version": "1"}) | json_values,
              "progressToken": st.integers() | st.text(max_size=3),
              "traceparent": st.just("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})
params = st.fixed_dictionaries(
    {}, optional={"name": st.text(max_size=8) | json_scalars,
                  "arguments": st.dictionaries(st.text(max_size=4), json_values, max_size=3)
                  | json_values,
                  "_meta": envelopes | json_values,
                  "task": json_values})
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"]) | json_scalars,
     "method": st.sampled_from(["tools/call", "tools/call", "tools/list"]) | st.text(max_size=4)},
    optional={"id": st.integers() | st.text(max_size=4) | json_scalars,
              "params": params | json_values, "extra": json_values})
ODD_LINES = [  # what json.dumps never writes, but a client may
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":"\\ud800"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":NaN}}}',
    '{"jsonrpc":"2.0","id":1,"id":"1","method":"tools/call","params":{"name":"a"}}',
    '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"a"}}',
    '{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a"}}',
    '\ufeff{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools\\/call","params":{"name":"a"}}\n',
    '{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"a"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":null}}',
]


def _check(lane: StdioLane, line: str) -> bool:
    """Whether the lane takes `line`; when it does, the SDK reads the very same request."""
    try:
        message = pydantic_core.from_json(line)
    except ValueError:
        message = None
    got = lane._context(message) if isinstance(message, dict) else None
    if got is None:
        return False
    ctx = got[0]
    parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(parsed, types.JSONRPCRequest), (line, parsed)
    assert parsed.method == "tools/call"
    assert type(parsed.id) is type(ctx.request_id) and parsed.id == ctx.request_id, line
    assert repr(parsed.params) == repr(ctx.params), line  # repr: NaN is not NaN
    assert _extract_meta(parsed.params) == ctx.meta, line
    assert repr((got[3], got[4])) == repr((parsed.params["name"],
                                           parsed.params.get("arguments") or {}))
    return True


@settings(max_examples=examples(400), deadline=None)
@given(message=messages, era=st.sampled_from(sorted(LANES)))
def test_a_line_the_lane_takes_is_the_request_the_sdk_reads(message: dict[str, Any],
                                                            era: str) -> None:
    _check(LANES[era], json.dumps(message))


@pytest.mark.parametrize("era", sorted(LANES))
def test_odd_lines_are_taken_only_as_the_sdk_reads_them(era: str) -> None:
    taken = [line for line in ODD_LINES if _check(LANES[era], line)]
    if era == "legacy":  # NaN, a repeated key, an escape, null arguments read alike; the rest
        # (a lone surrogate, an id beyond 64 bits, a float or bool id, a BOM) is the SDK's to judge
        assert taken == [ODD_LINES[i] for i in (1, 2, 6, 8)]
    else:
        assert taken == []  # none carries the 2026-07-28 envelope


@pytest.mark.parametrize("era", sorted(LANES))
def test_plain_calls_are_taken(era: str) -> None:
    meta = {V: "2026-07-28", CAPS: {}, INFO: {"name": "c", "version": "1"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "x", "arguments": {"a": 1}}}
    if era == "modern":
        call["params"]["_meta"] = meta  # type: ignore[index]
    assert _check(LANES[era], json.dumps(call))
    assert not _check(_lane(None), json.dumps(call))  # the SDK's loop has served nothing yet
    for aside in ({"progressToken": 1}, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-"
                                         "b7ad6b7169203331-01"}, {CAPS: {"sampling": {}}}):
        call["params"]["_meta"] = {**(meta if era == "modern" else {}), **aside}  # type: ignore[index]
        assert not _check(LANES[era], json.dumps(call)), aside


@settings(max_examples=examples(300), deadline=None)
@given(result=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
       rid=st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1) | st.text(max_size=5))
def test_the_answer_bytes_are_the_sdks(result: dict[str, Any], rid: int | str) -> None:
    lane_bytes = pydantic_core.to_json({"jsonrpc": "2.0", "id": rid, "result": result},
                                       inf_nan_mode="null")
    sdk = types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result).model_dump_json(
        by_alias=True, exclude_unset=True)
    assert lane_bytes == sdk.encode("utf-8")
