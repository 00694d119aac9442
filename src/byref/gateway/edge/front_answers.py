"""Records the answers the stdio front gives before the SDK is imported (`wire/front.json`).

Owns the one source of those answers: the full gateway itself. `record()` serves one stdio
session per probe through `serve_streams` (the SDK's loop, as a stdio client meets it) on a cold
gateway whose config carries the front's stand-ins (`wire.front.CONVERSATION`, `INLINE_BYTES`),
and keeps what it answered: `initialize` in every handshake-era version, `ping` after it, and
`server/discover` in every 2026-07-28-era version, with lists shared by everyone and per caller.
Run `python -m byref.gateway.edge.front_answers` after a change to what the gateway advertises
(or to the SDK); a test re-records and compares.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from byref.gateway.config.file import parse_config
from byref.gateway.core import Gateway
from byref.gateway.edge.server import serve_streams
from byref.gateway.wire.front import ANSWERS, CONVERSATION, INLINE_BYTES, installed
from byref.gateway.wire.stdio import parse_request_line

CLIENT = {"name": "byref-front-recorder", "version": "1"}
PROBE_TOKEN = "front-recorder-token-0000"
"""A token whose grant restricts it: a config with one is served lists per caller."""


def _config(private: bool) -> Any:
    # A server that never answers: the gateway stays cold (its first answers come before any
    # server is up), and it is ended with the gateway.
    raw: dict[str, Any] = {
        "mcpServers": {"cold": {"command": sys.executable,
                                "args": ["-c", "import sys; sys.stdin.read()"]}},
        "byref": {"autoInsertBytes": INLINE_BYTES, "store": "memory://", "state": "memory://"},
    }
    if private:
        raw["byref"]["tokens"] = {PROBE_TOKEN: {"tenant": "t", "principal": "p",
                                                "servers": ["cold"]}}
    config = parse_config(raw, source="<front recorder>")
    return dataclasses.replace(config, stdio_conversation=CONVERSATION)


async def _session(gateway: Gateway, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the gateway answers `lines` (requests and notifications) on one stdio session."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](8)
    answers: list[dict[str, Any]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(serve_streams, gateway, server_reads, server_writes)
        with anyio.fail_after(60):
            for line in lines:
                parsed = parse_request_line(json.dumps(line))
                assert not isinstance(parsed, Exception), parsed
                await to_server.send(parsed)
                if "id" in line:
                    message = (await from_server.receive()).message
                    answers.append(json.loads(message.model_dump_json(by_alias=True,
                                                                      exclude_unset=True)))
        group.cancel_scope.cancel()
    return answers


def _initialize(version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}}


def _discover(version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {}}}}


def _result(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer  # the gateway refused its own probe
    return answer["result"]


async def record() -> dict[str, Any]:
    """The answers `wire.front` gives, as the full gateway gives them now."""
    out: dict[str, Any] = {"versions": installed(), "initialize": {}, "discover": {}}
    for private in (False, True):
        async with Gateway(_config(private)) as gateway:
            found: dict[str, Any] = {}
            for version in MODERN_PROTOCOL_VERSIONS:
                found[version] = _result((await _session(gateway, [_discover(version)]))[0])
            out["discover"]["private" if private else "public"] = found
            if private:
                continue
            for version in HANDSHAKE_PROTOCOL_VERSIONS:
                init, ping = await _session(gateway, [
                    _initialize(version),
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "ping"}])
                out["initialize"][version] = _result(init)
                out["ping"] = _result(ping)
    return out


def dumps(recorded: dict[str, Any]) -> str:
    """The recording as `front.json` holds it."""
    return json.dumps(recorded, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def main(path: Path = ANSWERS) -> int:
    """Re-record `front.json`; returns the exit code."""
    path.write_text(dumps(anyio.run(record)), encoding="utf-8")
    print(f"recorded {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

