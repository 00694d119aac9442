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
"""

from __future__ import annotations

import json
import math
from typing import Any

import mcp_types as types
import pydantic_core

from byref.refs import quote

DEPTH = "deeper than the JSON parser's limit (about 200 levels)"


def answers(line: str) -> list[bytes]:
    """The error lines (JSON, no newline) that answer `line`, which failed the SDK's parse:
    one for a message, one per element of a batch, none for a blank line or a malformed
    response."""
    if not line.strip():
        return []  # a stray line ending, not a message
    try:
        raw: Any = pydantic_core.from_json(line)
        deep = False
    except ValueError:
        try:  # the standard parser reads deeper: the id of a too-deep request is still readable
            raw, deep = json.loads(line), True
        except (ValueError, RecursionError):
            return [_line(None, types.PARSE_ERROR,
                          "Parse error: the line is not JSON; send one JSON-RPC 2.0 object per "
                          'line, e.g. {"jsonrpc": "2.0", "id": 1, "method": "ping"}.')]
    if isinstance(raw, list):
        found = [a for a in (_answer(m, deep, batch=True) for m in raw) if a is not None]
        return found or [_line(None, types.INVALID_REQUEST, (
            "Invalid Request: an empty or unanswerable batch; send one JSON-RPC 2.0 object "
            "per line (MCP has no batches)."))]
    one = _answer(raw, deep, batch=False)
    return [] if one is None else [one]


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


def _answer(raw: Any, deep: bool, *, batch: bool) -> bytes | None:
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
    if deep:
        return _line(answer_id, types.INVALID_REQUEST, (
            f"Invalid Request: the message nests {DEPTH}; send the data by reference or "
            "flatter."))
    if raw.get("jsonrpc") != "2.0":
        got = "it is missing" if "jsonrpc" not in raw else f"got {quote(raw['jsonrpc'], 40)}"
        return _line(answer_id, types.INVALID_REQUEST,
                     f'Invalid Request: \'jsonrpc\' must be "2.0" ({got}).')
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
    return _line(answer_id, types.INVALID_REQUEST, (
        f"Invalid Request: {quote(method, 60)} is not a well-formed JSON-RPC 2.0 message "
        "(its members are jsonrpc, id, method and params, with params an object)."))


def _line(rid: str | int | float | None, code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}},
                      ensure_ascii=False).encode("utf-8")


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string",
                              bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
