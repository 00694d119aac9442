"""`byref gateway` over stdio: `--conversation ID` resumes a conversation in a new process (its
Message refs resolve, from the SQLite state beside the file store), `--trace FILE` writes the
typed events, `--otel FILE` the OpenTelemetry spans, and a bad `--state` URL is one line and
exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from _gateway_rig import World, text
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from _waits import scaled

pytestmark = pytest.mark.anyio


def _gateway(*args: str) -> list[str]:
    return [sys.executable, "-m", "byref.cli", "gateway", *args]


async def test_a_new_process_resumes_a_conversation_and_traces(world: World) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="byref[otel] is not installed")
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": world.need("filesystem")}))
    body = "resumed across processes\n" * 2_000
    (world.files / "a.txt").write_text(body)
    trace, spans = world.root / "trace.jsonl", world.root / "spans.jsonl"
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store",
                              "--conversation", "cli-conv", "--trace", str(trace),
                              "--otel", str(spans))
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    ref: dict[str, Any] = {}
    with anyio.fail_after(scaled(120)), world.log.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            read = await client.call_tool("call_tool", {
                "name": "filesystem__read_text_file",
                "arguments": {"path": str(world.files / "a.txt")}})
            assert not read.is_error, text(read)
            placed = json.loads(text(read))
            assert placed["value"]["$ref"]["type"] == "Blob"
            found = await client.call_tool("search_tools", {"query": "write a file"})
            assert not found.is_error
        assert (world.root / "store" / "state.db").is_file()
        import sqlite3

        with sqlite3.connect(world.root / "store" / "state.db") as db:
            (origin, length), = db.execute(
                "SELECT origin, length FROM byref_conversations WHERE conversation = ?",
                ("cli-conv",)).fetchall()
        assert length == 4  # two calls, two results
        ref = {"$ref": {"type": "Message", "seq": origin + 1, "part": 0, "field": "value"}}
        async with Client(stdio_client(params, errlog=errlog)) as client:
            copied = await client.call_tool("call_tool", {
                "name": "filesystem__write_file",
                "arguments": {"path": str(world.files / "b.txt"), "content": ref}})
            assert not copied.is_error, text(copied)
    assert (world.files / "b.txt").read_text() == body
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert any(e["event"] == "placed" and e["tool"] == "filesystem__read_text_file"
               for e in events)
    names = {json.loads(line)["name"] for line in spans.read_text().splitlines()}
    assert {"tools/call call_tool", "MCP send tools/call read_text_file"} <= names


def test_a_bad_state_url_is_one_line_and_exit_2(world: World) -> None:
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"x": {"command": "true"}}}))
    done = subprocess.run(_gateway("--config", str(config), "--state", "redis://x"),
                          capture_output=True, text=True, timeout=scaled(60),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr == ("byref gateway: State URL 'redis://x' names no conversation state; "
                           "use one of: memory://, sqlite:///PATH, postgresql://….\n")


async def test_a_blob_ref_outlives_its_stdio_process(world: World) -> None:
    """Issue 39.C: each stdio process is a new conversation, and a Blob ref stored by the last
    one was refused ("never stored in this session") though its bytes were in the store. A
    stored result belongs to the one local owner, as over HTTP to its token's; the process says
    which conversation it is in (stderr at start-up, `serverInfo.description`), for Message
    refs, which still need it."""
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": world.need("filesystem")}))
    body = "kept by the owner, not the process\n" * 2_000
    (world.files / "a.txt").write_text(body)
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store")
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    stderr = world.root / "first.err"
    with anyio.fail_after(scaled(120)):
        with stderr.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                info = client.server_info
                read = await client.call_tool("call_tool", {
                    "name": "filesystem__read_text_file",
                    "arguments": {"path": str(world.files / "a.txt")}})
                assert not read.is_error, text(read)
        ref = json.loads(text(read))["value"]
        assert ref["$ref"]["type"] == "Blob"
        [said] = [line for line in stderr.read_text().splitlines() if "conversation" in line]
        first = said.split("'")[1]
        assert first.startswith("stdio-") and said == (
            f"byref gateway: stdio conversation {first!r}; resume it with --conversation "
            f"{first} (Message refs address it; Blob refs outlive it)")
        assert info is not None and info.description is not None
        assert f"conversation {first!r}" in info.description
        with world.log.open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert client.server_info is not None
                assert first not in (client.server_info.description or "")  # a new one
                copied = await client.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(world.files / "b.txt"), "content": ref}})
                assert not copied.is_error, text(copied)
    assert (world.files / "b.txt").read_text() == body
