"""HTTP: a connection the gateway accepts has TCP_NODELAY set, so a small response is not held
back by Nagle's algorithm waiting for the client's delayed ACK (~40 ms per request)."""

from __future__ import annotations

import io
import os
import socket
import stat
from pathlib import Path

import anyio
import pytest
from _gateway_rig import World, running
from anyio.abc import SocketAttribute

from _waits import scaled
from byref.gateway import listen_socket, serve_http

pytestmark = pytest.mark.anyio

TOKENS = {"nodelay-token-0123456789abcdef": {"tenant": "t", "principal": "p"}}


def _fd_dir() -> Path:
    for candidate in (Path("/proc/self/fd"), Path("/dev/fd")):
        if candidate.is_dir():
            return candidate
    pytest.skip("this platform lists no open file descriptors (/proc/self/fd, /dev/fd)")


def accepted_socket_nodelay(server: tuple[str, int], peer: tuple[str, int]) -> int | None:
    """TCP_NODELAY of this process's socket connected `server` ← `peer`, read on a duplicate of
    its descriptor (the server runs in-process; its transport is not reachable otherwise)."""
    for name in os.listdir(_fd_dir()):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            dup = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue  # closed since the listing (the listing's own descriptor among them)
        with dup:
            try:
                if dup.getsockname()[:2] != server or dup.getpeername()[:2] != peer:
                    continue
            except OSError:
                continue  # a listener or another family: no peer
            return dup.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    return None


async def test_an_accepted_http_connection_has_tcp_nodelay(world: World) -> None:
    servers = {"changing": world.fixture("changing.py")}  # never started: no call is made
    with anyio.fail_after(scaled(30)):
        async with running(world, servers, tokens=TOKENS) as (gateway, _server):
            sock = listen_socket("127.0.0.1", 0)
            address = sock.getsockname()[:2]
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
                async with await anyio.connect_tcp(*address) as stream:
                    # One full HTTP exchange: once its answer is back, the server has accepted.
                    await stream.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    answer = b""
                    while b"\r\n\r\n" not in answer:
                        answer += await stream.receive()
                    assert answer.startswith(b"HTTP/1.1 401"), answer
                    peer = stream.extra(SocketAttribute.local_address)
                    assert isinstance(peer, tuple)
                    nodelay = accepted_socket_nodelay(address, peer[:2])
                group.cancel_scope.cancel()
            sock.close()
    assert nodelay is not None, "the gateway's accepted socket was not found"
    assert nodelay != 0, "TCP_NODELAY is off on the connection the gateway accepted"
