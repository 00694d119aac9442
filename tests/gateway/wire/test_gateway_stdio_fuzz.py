"""Fuzzed lines over a real `byref gateway` stdio subprocess: every line with a readable id gets
exactly one answer under it, every other one exactly one with id null, and the gateway keeps
serving (defect 8 of [trust III]: a BOM-prefixed line and JSON nested ~4,000 deep went
unanswered under their ids; a lone surrogate escape in an id stopped the gateway).

Lines are built so their truth is known: a request with a readable id, made strange (nested 150
to 5,000 deep, a BOM in front, invalid UTF-8 or raw non-ASCII inside a string, numbers of
thousands of digits or past a float, NaN, lone surrogate escapes); one with an id no parser
reads exactly (true, null, an object, 5,000 digits, 1e99999); and any proper prefix of either
(never JSON). `deepjson`, which reads these lines for their ids, is pinned against `json.loads`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from typing import Any

import pydantic_core
import pytest
from _gateway_rig import World
from _stdio_gateway import Gateway
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from byref.gateway.wire import deepjson
from byref.gateway.wire.malformed import PARSER_DEPTH, TOO_DEEP, answers

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "fuzz-test", "version": "1"}}}
METHODS = ["ping", "tools/list", "tools/call", "resources/list", "prompts/list", "no/such"]
BAD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9d", b"\x80\x80", b"\xfe\xff"]
HOLE = "@@hole@@"
"""Where raw bytes go into a line after it is written (inside a string: still JSON)."""

_NUMBERS = st.sampled_from(["9" * 300, "9" * 4301, "-" + "1" * 6000, "1e99999", "-1e-99999",
                            "1." + "5" * 5000, "NaN", "Infinity", "-Infinity", "0", "-0.0"])
_LEAF = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
         | st.text(max_size=6) | st.just(HOLE))


def _nest(kinds: list[bool]) -> str:
    """A 0 nested in lists (True) and objects (False), as text (json.dumps would recurse)."""
    return ("".join("[" if as_list else '{"a":' for as_list in kinds) + "0"
            + "".join("]" if as_list else "}" for as_list in reversed(kinds)))


@st.composite
def _params(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """Params (with placeholders) and the raw texts that replace them."""
    value = draw(st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=4), inner, max_size=3), max_leaves=8))
    numbers = draw(st.lists(_NUMBERS, max_size=2))
    value = {"v": value, **{f"n{i}": f"@@num{i}@@" for i in range(len(numbers))}}
    if draw(st.booleans()):
        value["s"] = draw(st.sampled_from(["\ud800", "a\udfffb", "\udc00\ud800"]))
    if draw(st.booleans()):
        levels = draw(st.integers(min_value=150, max_value=5000))
        value["deep"] = f"@@num{len(numbers)}@@"
        shapes = draw(st.randoms(use_true_random=False))
        numbers.append(_nest([shapes.random() < 0.5 for _ in range(levels)]))
    return value, numbers


def _write(message: dict[str, Any], numbers: list[str], holes: list[bytes]) -> bytes:
    text = json.dumps(message)  # ASCII: a lone surrogate goes as its escape
    for i, number in enumerate(numbers):
        text = text.replace(f'"@@num{i}@@"', number)
    data = text.encode("ascii")
    for hole in holes:
        data = data.replace(HOLE.encode(), hole, 1)
    return data.replace(HOLE.encode(), "é€𝄞".encode())


@st.composite
def _case(draw: st.DrawFn, ids: itertools.count[int]) -> tuple[bytes, object]:
    """A line and the id its one answer must carry (None: id null)."""
    n = next(ids)
    readable = draw(st.booleans())
    rid: Any = draw(st.sampled_from([f"r{n}", n, f"r{n}\ud800", f"é{n}"])) if readable else (
        draw(st.sampled_from([True, None, {"a": n}, [n], "@@num-id@@"])))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid,
                               "method": draw(st.sampled_from(METHODS))}
    params, numbers = draw(_params())
    if draw(st.booleans()):
        message["params"] = params
    line = _write(message, numbers, draw(st.lists(st.sampled_from(BAD_BYTES), max_size=3)))
    line = line.replace(b'"@@num-id@@"', draw(st.sampled_from([b"9" * 5000, b"1e99999"])))
    if draw(st.booleans()):
        line = "\ufeff".encode() + line
    if draw(st.integers(min_value=0, max_value=4)) == 0:  # a proper prefix: never JSON
        line, readable = line[:draw(st.integers(min_value=1, max_value=len(line) - 1))], False
    return line, rid if readable else None


@pytest.mark.slow  # 300 round trips through a gateway process: about 40 s here
def test_every_fuzzed_line_gets_one_answer_and_the_gateway_stays_up(world: World) -> None:
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"echo": world.fixture("meta_echo.py")}}))
    gw = Gateway(config, world.root)
    ids = itertools.count(1)
    sent: Counter[str] = Counter()
    notes: list[dict[str, Any]] = []
    try:
        gw.send(json.dumps(INIT).encode())
        assert "result" in gw.until("init")[-1]
        gw.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

        # One gateway for all examples: no shrinking (a dead gateway fails every smaller case).
        @settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(case=_case(ids))
        def one(case: tuple[bytes, object]) -> None:
            line, rid = case
            gw.send(line)
            probe = f"probe-{next(ids)}"
            gw.send(json.dumps({"jsonrpc": "2.0", "id": probe, "method": "ping"}).encode())
            got = gw.until(probe, Counter({rid: 1}) if rid is not None else None)
            notes.extend(a for a in got if "id" not in a)  # the gateway's own notifications
            got = [a for a in got if "id" in a]
            pong = [a for a in got if a["id"] == probe]
            assert pong == [{"jsonrpc": "2.0", "id": probe, "result": {}}]  # still up
            got = [a for a in got if a["id"] != probe]
            assert [a["id"] for a in got] == [rid], (line[:300], got)
            if "error" in got[0]:
                assert got[0]["error"]["code"] in (-32700, -32600, -32602, -32601), got
            sent["null" if rid is None else "readable"] += 1

        one()
    finally:
        rest = gw.close()
    assert rest == []  # nothing answered twice
    assert sent["readable"] > 50 and sent["null"] > 50, sent
    assert all("method" in n for n in notes), notes[:3]


def test_the_parser_limits_are_pydantics() -> None:
    """`malformed` tells depth from what pydantic's parser (the SDK's) says and reads."""
    pydantic_core.from_json("[" * PARSER_DEPTH + "]" * PARSER_DEPTH)
    with pytest.raises(ValueError, match=TOO_DEEP):
        pydantic_core.from_json("[" * (PARSER_DEPTH + 1) + "]" * (PARSER_DEPTH + 1))


def _one(line: str) -> dict[str, Any]:
    found = answers(line)
    assert len(found) == 1, found
    out: dict[str, Any] = json.loads(found[0])
    return out


def test_the_lines_that_went_unanswered_are_answered_under_their_ids() -> None:
    assert _one('\ufeff{"jsonrpc": "2.0", "id": 3, "method": "ping"}') == {
        "jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": (
            "Invalid Request: the line starts with a byte order mark (U+FEFF), which JSON sent "
            "over a network must not carry (RFC 8259 §8.1); send UTF-8 without it.")}}
    for deep in ("[" * 4000 + "]" * 4000, '{"a":' * 4000 + "0" + "}" * 4000):
        got = _one('{"jsonrpc": "2.0", "id": "d", "method": "ping", "params": {"x": '
                   + deep + "}}")
        assert got["id"] == "d" and got["error"]["code"] == -32600, got
    surrogate = _one('{"jsonrpc": "2.0", "id": "s\\ud800", "method": "ping"}')
    assert surrogate["id"] == "s\ud800" and surrogate["error"]["message"].startswith(
        "Invalid Request: 'ping' cannot be read: the JSON parser refused it ("), surrogate
    assert answers('{"jsonrpc": "2.0", "id": "s\\ud800", "method": "ping"}')[0].isascii()
    assert _one('{"jsonrpc": "2.0", "id": ' + "7" * 5000 + ', "method": "ping"}') == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": (
            "Invalid Request: 'id' is an integer of 5,000 digits, past the 4,300 digits a JSON "
            "parser reads; send a shorter string or integer.")}}
    assert _one("\ufeff")["error"]["code"] == -32700
    assert answers('\ufeff{"jsonrpc": "2.0", "id": 3, "result": {}}') == []  # a reply


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=4), max_leaves=20)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a) == json.dumps(b) or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=300, deadline=None)
@given(_JSON, st.integers(min_value=0, max_value=3))
def test_deepjson_reads_json_as_the_standard_parser_does(value: Any, indent: int) -> None:
    text = json.dumps(value, indent=indent or None)
    got, depth = deepjson.read(text, keep=10_000)
    assert json.dumps(got) == json.dumps(json.loads(text))
    cut, _ = deepjson.read(text, keep=1)
    if isinstance(value, dict | list):
        assert all(not v for v in (cut.values() if isinstance(cut, dict) else cut)
                   if isinstance(v, dict | list))
        assert depth >= 1
    else:
        assert depth == 0


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='[]{},:" 0123456789.eE-+tfnulrsaNI\\\n', max_size=30))
def test_deepjson_refuses_what_the_standard_parser_refuses(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except json.JSONDecodeError:
        with pytest.raises(ValueError):
            deepjson.read(text, keep=100)
        return
    assert _same(deepjson.read(text, keep=100)[0], expected)


def test_deepjson_reads_any_depth_and_long_integers() -> None:
    value, depth = deepjson.read('{"id": 5, "p": ' + "[" * 50_000 + "]" * 50_000 + "}", keep=2)
    assert value == {"id": 5, "p": [[]]} and depth == 50_001
    value, _ = deepjson.read("[" + "9" * 5000 + ", -" + "1" * 4400 + "]", keep=2)
    assert value == [deepjson.LongNumber(5000), deepjson.LongNumber(4400)]
    assert repr(value[0]) == "an integer of 5,000 digits"
    for bad in ["[1,]", '{"a":}', "{,}", "[1 2]", "01", '"\x01"', "[] ]", "", "-", "nul"]:
        with pytest.raises(ValueError):
            deepjson.read(bad, keep=5)
