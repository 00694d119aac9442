"""The bare servers `byref bench startup` starts beside the gateway: one echo tool, nothing else.

    python src/byref/bench/gateway/bare.py fastmcp   # FastMCP (the standalone package), stdio
    python src/byref/bench/gateway/bare.py sdk       # the official SDK's MCPServer, stdio

Run by path, not as a module, so no byref code is imported: the start-up measured is the
framework's own.
"""

from __future__ import annotations

import sys


def echo(text: str) -> str:
    """Say `text` back."""
    return text


def main(kind: str) -> None:
    """Serve the bare server of `kind` on stdio until the client leaves."""
    if kind == "fastmcp":
        from fastmcp import FastMCP

        fast = FastMCP("bare-fastmcp")
        fast.tool(echo)
        fast.run(show_banner=False)
    elif kind == "sdk":
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("bare-sdk", log_level="WARNING")
        server.tool()(echo)
        server.run()
    else:
        raise SystemExit(f"bare.py: unknown server {kind!r}; one of 'fastmcp', 'sdk'")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
