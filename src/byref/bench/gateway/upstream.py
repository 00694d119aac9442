"""The upstream `byref bench gateway` measures against: a small MCP server (the `mcp` SDK's
MCPServer) that answers a short echo, text of a requested size and shape, and a wait of a given
number of seconds (a long call, for the tasks figures).

    python -m byref.bench.gateway.upstream            # stdio
    python -m byref.bench.gateway.upstream --http     # streamable HTTP on a free port; the address
                                                      # is printed on stderr

It ships in the package because `byref bench` must run from an install. The law: a text of one
size and shape is built once and then served from memory, so a timed call measures the transport
and whatever sits between client and server, not text generation; over HTTP the listening socket
is IPPROTO_TCP, as uvicorn's own (host, port) binding would make it, so accepted connections get
TCP_NODELAY like any SDK server's.
"""

from __future__ import annotations

import argparse
import socket
import sys
from functools import lru_cache
from typing import Literal

import anyio
from mcp.server.mcpserver import MCPServer

Shape = Literal["plain", "log"]

server: MCPServer = MCPServer("byref-bench", log_level="WARNING")

_PLAIN = ("The quarterly survey of the northern orchards counted {i} rows of young trees, "
          "most of them planted in the spring and watered by hand through the dry summer.")
_INFO = "2026-03-14T09:26:53.{ms:03d}Z INFO  worker-{w} request {i} served in {ms} ms"
_ERROR = "2026-03-14T09:26:53.{ms:03d}Z ERROR worker-{w} request {i} failed: connection reset"


@lru_cache(maxsize=8)
def make_text(size: int, shape: Shape) -> str:
    """`size` characters of prose (`plain`) or of a log with an error on every other line."""
    lines: list[str] = []
    used = i = 0
    while used < size:
        if shape == "log":
            line = (_ERROR if i % 2 else _INFO).format(ms=i % 1000, w=i % 8, i=i)
        else:
            line = _PLAIN.format(i=i)
        lines.append(line)
        used += len(line) + 1
        i += 1
    return "\n".join(lines)[:size]


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return `text` unchanged."""
    return text


@server.tool(structured_output=False)
def text(size: int, shape: Shape = "plain") -> str:
    """Return `size` characters of prose (`plain`) or of a log with every other line an error
    (`log`)."""
    return make_text(size, shape)


@server.tool(structured_output=False)
async def wait(seconds: float) -> str:
    """Answer after `seconds` seconds."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g} s"


def listen(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to a free port on `host`, listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind((host, 0))
    sock.listen(128)
    return sock


def serve_http(host: str = "127.0.0.1") -> None:
    """Serve the bench upstream over streamable HTTP on a free port, announcing its URL on
    stderr."""
    import uvicorn

    sock = listen(host)
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    shown = f"[{host}]" if ":" in host else host
    print(f"bench upstream listening on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    """`python -m byref.bench.gateway.upstream`: stdio, or streamable HTTP with `--http`."""
    parser = argparse.ArgumentParser(prog="python -m byref.bench.gateway.upstream")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP")
    parser.add_argument("--label", default=None,
                        help="ignored: tells one bench process from another by its command line")
    args = parser.parse_args(argv)
    if args.http:
        serve_http()
    else:
        server.run()


if __name__ == "__main__":
    main()
