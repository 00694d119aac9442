"""FastMCP's side of `byref bench refline`: the bench upstream's `echo` as a FastMCP server.

    python -m byref.bench.gateway.fastmcp_echo      # stdio

It ships in the package because `byref bench` must run from an install; it needs the `bench`
extra (fastmcp), which the bench checks for before starting it.
"""

from __future__ import annotations

from fastmcp import FastMCP

server = FastMCP("byref-bench-fastmcp")


@server.tool
def echo(text: str) -> str:
    """Return `text` unchanged."""
    return text


if __name__ == "__main__":
    server.run(show_banner=False, log_level="WARNING")
