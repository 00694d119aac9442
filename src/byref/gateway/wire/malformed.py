"""The JSON-RPC answer to a stdio line that is not a valid message (the SDK drops such a line).

Owns what a client hears when its line fails the SDK's parse. Over HTTP the SDK answers 400;
over stdio it only logs, so a client waiting on the request's id waits forever. The law (JSON-RPC
2.0 §5.1): a line that is not JSON is answered `-32700 Parse error` with id null; JSON that is not
a valid request is answered `-32600 Invalid Request` — or `-32602 Invalid params` when only its
`params` is wrong — under its id when the id is readable (a string or a number), else id null;
a response-shaped object (`result` or `error` beside an id, no method) is never answered (the
server does not reply to replies). An object with an `id` the SDK cannot take as a request id
(a fraction, a boolean, null, an object) parses as a notification and would never be answered:
it is refused too (`hides_request`), under the id when it is a number, else null. Each message
says what was wrong and what would fit, quoting at most ~100 characters of what was sent.

JSON the SDK's parser refuses is still read for its id (`deepjson`, any depth): nested past the
parser's limit, a lone surrogate escape or an integer past 4,300 digits is `-32600` under the
id. A line starting with a byte order mark is answered `-32600` under its id too, never served:
RFC 8259 §8.1 forbids a sender the BOM and only lets a parser skip it, and the SDKs do not (the
Python SDK's stdio reader decodes plain UTF-8, the TypeScript SDK's `JSON.parse` rejects it), so
a client that sends one fails on every other server: it hears why here instead of hanging.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core

from byref.gateway.wire import deepjson
from byref.refs import quote

DEPTH = "deeper than the JSON parser's limit (about 200 levels)"
PARSER_DEPTH = 201
"""The deepest nesting pydantic's JSON parser (the SDK's) reads (pinned by a test)."""
TOO_DEEP = "recursion limit exceeded"
"""What that parser says past its depth (pinned by a test)."""
BOM = "\ufeff"
DEPTH_WHY = f"the message nests {DEPTH}; send the data by reference or flatter"
BOM_WHY = ("the line starts with a byte order mark (U+FEFF), which JSON sent over a network "
           "must not carry (RFC 8259 §8.1); send UTF-8 without it")


def answers(line: str) -> list[bytes]:
    """The error lines (JSON, no newline) that answer `line`, which failed the SDK's parse:
    one for a message, one per element of a batch, none for a blank line or a malformed
    response."""
    if not line.strip():
        return []  # a stray line ending, not a message
    why = Why(first=BOM_WHY if line.startswith(BOM) else None)
    text = line.removeprefix(BOM)
    try:
        raw: Any = pydantic_core.from_json(text)
    except ValueError as exc:
        try:
            raw, deep = _read(text, exc)
        except ValueError:
            return [_line(None, types.PARSE_ERROR,
                          "Parse error: the line is not JSON; send one JSON-RPC 2.0 object per "
                          'line, e.g. {"jsonrpc": "2.0", "id": 1, "method": "ping"}.')]
        if deep:
            why = Why(first=why.first or DEPTH_WHY)
        else:  # a lone surrogate escape, an integer past 4,300 digits
            why = Why(first=why.first, last=f"the JSON parser refused it ({exc})")
    if isinstance(raw, list):
        found = [a for a in (_answer(m, why, batch=True) for m in raw) if a is not None]
        return found or [_line(None, types.INVALID_REQUEST, (
            "Invalid Request: an empty or unanswerable batch; send one JSON-RPC 2.0 object "
            "per line (MCP has no batches)."))]
    one = _answer(raw, why, batch=False)
    return [] if one is None else [one]


def _read(text: str, refused: ValueError) -> tuple[Any, bool]:
    """JSON the SDK's parser `refused`, and whether it nests past that parser's limit;
    ValueError when it is not JSON. The standard parser first (fast, about 1,000 levels), then
    `deepjson` (any depth, slower) where it gives up."""
    try:
        return json.loads(text), TOO_DEEP in str(refused)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError):  # too deep for it too, or an integer past 4,300 digits
        raw, depth = deepjson.read(text, keep=PARSER_DEPTH)
        return raw, depth > PARSER_DEPTH


@dataclass(frozen=True)
class Why:
    """What is wrong beyond the message's members: `first` answers before they are looked at
    (a BOM, too deep), `last` only when they all fit (what the parser refused)."""

    first: str | None = None
    last: str | None = None


def hides_request(line: str) -> bool:
    """Whether a line the SDK parsed as a notification carries an `id` member (which the SDK
    dropped because it cannot be a request id): then it is answered, not served."""
    if '"id"' not in line:
        return False
    try:
        raw = pydantic_core.from_json(line)
    except ValueError:
        return False
    return isinstance(raw, dict) and "id" in raw


def _answer(raw: Any, why: Why, *, batch: bool) -> bytes | None:
    if not isinstance(raw, dict):
        return _line(None, types.INVALID_REQUEST, (
            f"Invalid Request: a JSON-RPC message is an object, got {_kind(raw)}; send "
            '{"jsonrpc": "2.0", "id": <string or integer>, "method": "<name>", "params": {...}}.'))
    rid = raw.get("id")
    readable = type(rid) in (str, int) or (type(rid) is float and math.isfinite(rid))
    if "method" not in raw and readable and ("result" in raw or "error" in raw):
        return None  # a malformed reply: never answered
    answer_id = rid if readable else None
    if batch:
        return _line(answer_id, types.INVALID_REQUEST, (
            "Invalid Request: MCP has no batches; send each JSON-RPC 2.0 message as an object "
            "on its own line."))
    if why.first is not None:
        return _line(answer_id, types.INVALID_REQUEST, f"Invalid Request: {why.first}.")
    if raw.get("jsonrpc") != "2.0":
        got = "it is missing" if "jsonrpc" not in raw else f"got {quote(raw['jsonrpc'], 40)}"
        return _line(answer_id, types.INVALID_REQUEST,
                     f'Invalid Request: \'jsonrpc\' must be "2.0" ({got}).')
    if isinstance(rid, deepjson.LongNumber):
        return _line(None, types.INVALID_REQUEST, (
            f"Invalid Request: 'id' is {rid!r}, past the 4,300 digits a JSON parser reads; send a "
            "shorter string or integer."))
    if "id" in raw and type(rid) not in (str, int):
        return _line(answer_id, types.INVALID_REQUEST, (
            f"Invalid Request: 'id' must be a string or an integer, got {quote(rid, 40)}; a "
            "notification has no 'id' at all."))
    method = raw.get("method")
    if not isinstance(method, str):
        got = "it is missing" if "method" not in raw else f"got {quote(method, 40)}"
        return _line(answer_id, types.INVALID_REQUEST,
                     f"Invalid Request: 'method' must be a string naming the request ({got}).")
    if "params" in raw and not isinstance(raw["params"], dict):
        return _line(answer_id, types.INVALID_PARAMS, (
            f"Invalid params: 'params' of {quote(method, 60)} must be an object, got "
            f"{_kind(raw['params'])}; leave it out when there are none."))
    if why.last is not None:
        return _line(answer_id, types.INVALID_REQUEST,
                     f"Invalid Request: {quote(method, 60)} cannot be read: {why.last}.")
    return _line(answer_id, types.INVALID_REQUEST, (
        f"Invalid Request: {quote(method, 60)} is not a well-formed JSON-RPC 2.0 message "
        "(its members are jsonrpc, id, method and params, with params an object)."))


def _line(rid: str | int | float | None, code: int, message: str) -> bytes:
    answer = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    try:
        return json.dumps(answer, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in the id: echoed as the escape it came as
        return json.dumps(answer).encode("ascii")


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string",
                              bool: "a boolean", int: "a number", float: "a number",
                              deepjson.LongNumber: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
