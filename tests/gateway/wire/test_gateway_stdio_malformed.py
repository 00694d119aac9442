"""A malformed request over stdio is answered, never left hanging (defect 11 of [trust II]).

The SDK's stdio reader only logs a line that fails its parse, so a client waiting on that id
waited forever (HTTP answers 400). Over a real `byref gateway` stdio subprocess, a generator
covers the classes — `params` not an object, `jsonrpc` missing or wrong, no method, an id that
cannot be read, nesting past the parser's limit, batches, lines that are not JSON — before and
after the handshake: every request with a readable id gets exactly one answer, each unreadable
one an answer with id null, and the gateway keeps serving. The answers themselves are pinned
on `malformed.answers`, with a hypothesis property over arbitrary JSON values.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

from _gateway_rig import World
from _stdio_gateway import Gateway
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.gateway.wire.malformed import answers

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "malformed-test", "version": "1"}}}
METHODS = ["ping", "tools/list", "tools/call", "initialize", "resources/read", "no/such"]


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def _malformed(rid: str | int, method: str) -> list[dict[str, Any] | list[Any]]:
    """Every malformed shape of one request, all under id `rid`."""
    base = {"jsonrpc": "2.0", "id": rid, "method": method}
    out: list[dict[str, Any] | list[Any]] = []
    for params in ["text", 7, 2.5, True, [1, 2], ""]:  # not an object
        out.append({**base, "params": params})
    for jsonrpc in [None, "1.0", "2", 2.0, 2]:
        out.append({**base, "jsonrpc": jsonrpc})
    out.append({k: v for k, v in base.items() if k != "jsonrpc"})
    out.append({"jsonrpc": "2.0", "id": rid})  # no method
    out.append({"jsonrpc": "2.0", "id": rid, "method": None})
    out.append({"jsonrpc": "2.0", "id": rid, "method": 5, "params": {}})
    for levels in [201, 250, 600]:
        out.append({**base, "params": {"deep": _deep(levels)}})
    out.append([{**base, "params": {}}])  # a batch, which MCP does not have
    # Well-formed: served by the SDK under a string or integer id; under a fractional one the
    # SDK's parse takes it for a notification, which the gateway refuses.
    out.append({**base, "params": {}})
    # Well-formed JSON-RPC whose params do not fit the method: the SDK's own errors.
    out.append({**base, "params": {"name": 5, "uri": 7, "arguments": "x", "cursor": 3}})
    out.append({**base, "params": {"_meta": "not an object"}})
    return out


UNREADABLE = [  # lines whose id cannot be read: answered once each, with id null
    b"not json at all", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
    b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', b'{"jsonrpc": "2.0", "id": null, '
    b'"method": "ping"}', b"[]", b"42", b'"ping"',
    b'{"jsonrpc": "2.0", "method": "ping", "params": "x"}', b"[" * 5000 + b"]" * 5000,
]


def _exchange(gw: Gateway, stage: str, counter: itertools.count[int]) -> int:
    """Send every malformed shape, then a ping; check the answers; how many were sent."""
    expected: Counter[Any] = Counter()
    for method in METHODS:
        for n, shape in enumerate(_malformed("seed", method)):
            at = next(counter)  # ids: strings, integers and (not MCP's, still answered) fractions
            rid: str | int | float = (f"{stage}-{at}", at, at + 0.5)[n % 3]
            text = json.dumps(shape).replace('"seed"', json.dumps(rid))
            gw.send(text.encode())
            expected[rid] += 1
    for line in UNREADABLE:
        gw.send(line)
        expected[None] += 1
    gw.send(json.dumps({"jsonrpc": "2.0", "id": f"{stage}-ping", "method": "ping"}).encode())
    got = gw.until(f"{stage}-ping", expected)
    pong = [a for a in got if a.get("id") == f"{stage}-ping"]
    assert pong == [{"jsonrpc": "2.0", "id": f"{stage}-ping", "result": {}}]  # still serving
    got = [a for a in got if a.get("id") != f"{stage}-ping"]
    seen = Counter(a.get("id") for a in got)
    assert seen == expected, (seen - expected, expected - seen)
    for answer in got:
        if "result" in answer:  # a well-formed request, served
            assert type(answer["id"]) in (str, int), answer
            continue
        error = answer["error"]
        assert error["code"] in (-32700, -32600, -32602, -32601), answer
        assert len(error["message"]) < 400, answer
    return sum(expected.values())


def test_every_malformed_request_over_stdio_is_answered_once(world: World) -> None:
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"echo": world.fixture("meta_echo.py")}}))
    gw = Gateway(config, world.root)
    rest: list[dict[str, Any]] = []
    try:
        counter = itertools.count(1)
        sent = _exchange(gw, "before", counter)  # before the handshake
        gw.send(json.dumps(INIT).encode())
        assert "result" in gw.until("init")[-1]
        gw.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        sent += _exchange(gw, "after", counter)
        gw.send(json.dumps({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}).encode())
        assert gw.until("list")[-1]["result"]["tools"]
        assert sent > 250
    finally:
        rest = gw.close()
    assert rest == []  # nothing answered twice


def _one(line: str) -> dict[str, Any]:
    found = answers(line)
    assert len(found) == 1, found
    out: dict[str, Any] = json.loads(found[0])
    return out


def test_each_class_is_answered_with_the_error_the_spec_names() -> None:
    assert _one("nope") == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": (
        "Parse error: the line is not JSON; send one JSON-RPC 2.0 object per line, e.g. "
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}.')}}
    assert _one('{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": "x"}')["error"] == {
        "code": -32602, "message": ("Invalid params: 'params' of 'ping' must be an object, got "
                                    "a string; leave it out when there are none.")}
    assert _one('{"jsonrpc": "1.0", "id": "a", "method": "ping"}') == {
        "jsonrpc": "2.0", "id": "a", "error": {"code": -32600, "message": (
            "Invalid Request: 'jsonrpc' must be \"2.0\" (got '1.0').")}}
    assert _one('{"id": 4, "method": "ping"}')["error"]["message"] == (
        "Invalid Request: 'jsonrpc' must be \"2.0\" (it is missing).")
    assert _one('{"jsonrpc": "2.0", "id": 5}')["error"] == {"code": -32600, "message": (
        "Invalid Request: 'method' must be a string naming the request (it is missing).")}
    deep = _one('{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"a": '
                + "[" * 300 + "]" * 300 + "}}")
    assert deep["id"] == 6 and deep["error"] == {"code": -32600, "message": (
        "Invalid Request: the message nests deeper than the JSON parser's limit (about 200 "
        "levels); send the data by reference or flatter.")}
    assert _one('{"jsonrpc": "2.0", "id": false, "method": "ping"}') == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": (
            "Invalid Request: 'id' must be a string or an integer, got False; a notification "
            "has no 'id' at all.")}}
    assert _one('{"jsonrpc": "2.0", "id": Infinity, "method": "ping"}') == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": (
            "Invalid Request: 'id' must be a string or an integer, got inf; a notification "
            "has no 'id' at all.")}}
    assert answers('{"jsonrpc": "1.0", "id": 7, "result": {}}') == []  # a reply: not answered
    assert answers("\n") == []


_JSON = st.recursive(
    # No infinities: json.dumps writes them as `Infinity`, which no JSON id can echo (pinned above).
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "x"]), inner,
        max_size=5),
    max_leaves=12)


@settings(max_examples=examples(400), deadline=None)
@given(_JSON)
def test_a_line_with_a_readable_id_gets_exactly_one_answer_under_it(value: Any) -> None:
    found = [json.loads(a) for a in answers(json.dumps(value))]
    assert all(a["jsonrpc"] == "2.0" and len(a["error"]["message"]) < 400 for a in found)
    if isinstance(value, dict):
        rid = value.get("id")
        replying = "method" not in value and ("result" in value or "error" in value)
        if type(rid) in (str, int, float) and not replying:  # a fraction is echoed too
            assert [a["id"] for a in found] == [rid]
        elif type(rid) not in (str, int, float):
            assert [a["id"] for a in found] == [None]
