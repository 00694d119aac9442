"""The lens answers only the hosts it was started for (issue 27.10): a page on another site that
points its name at 127.0.0.1 (DNS rebinding) gets 421 and reads nothing, by `Host` header or by
absolute-form request target; the gateway's `/lens` answers the hosts its MCP route answers."""

from __future__ import annotations

import io
import select
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _lens_rig import BYREF, make_kinds_run
from hypothesis import given
from hypothesis import strategies as st

from _waits import scaled
from byref.lens import Lens, load_run, make_server
from byref.lens.serving.hosts import allowed_hosts, misdirected


def raw(port: int, head: str) -> tuple[str, bytes]:
    """Send `head` (request line and headers) as written; the status line and the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(30)) as sock:
        sock.sendall(head.encode() + b"Connection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status, _, rest = data.partition(b"\r\n")
    return status.decode(), rest.partition(b"\r\n\r\n")[2]


@pytest.fixture(scope="module")
def kinds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lens-hosts") / "run"
    make_kinds_run(out)
    return out


@pytest.fixture
def port(kinds_dir: Path) -> Iterator[int]:
    server = make_server(Lens(load_run(kinds_dir)), "127.0.0.1", 0,
                         allow_hosts=["lens.internal"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_another_host_is_refused_before_any_page(port: int) -> None:
    for head in ("GET / HTTP/1.1\r\nHost: attacker.example\r\n",
                 f"GET / HTTP/1.1\r\nHost: attacker.example:{port}\r\n",
                 f"GET /artifact/x HTTP/1.1\r\nHost: 127.0.0.1.attacker.example:{port}\r\n",
                 f"HEAD / HTTP/1.1\r\nHost: 127.0.0.2:{port}\r\n",
                 f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port + 1}\r\n",
                 "GET / HTTP/1.0\r\n",  # no Host at all
                 f"POST / HTTP/1.1\r\nHost: attacker.example:{port}\r\nContent-Length: 0\r\n"):
        status, body = raw(port, head)
        assert status.split()[1] == "421", (head, status)
        if not head.startswith("HEAD"):
            assert body.startswith(b"This lens answers only for 127.0.0.1:"), body
            assert b"<" not in body and b"acme" not in body  # one line, nothing of the run


def test_an_absolute_form_target_is_judged_by_its_own_authority(port: int) -> None:
    status, body = raw(port, f"GET http://attacker.example/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n")
    assert status.split()[1] == "421" and b"'attacker.example'" in body
    status, _ = raw(port, f"GET http://localhost:{port}/ HTTP/1.1\r\nHost: attacker.example\r\n")
    assert status.split()[1] == "200"


def test_the_names_it_was_started_for_are_answered(port: int) -> None:
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}",
                 f"lens.internal:{port}"):
        status, body = raw(port, f"GET / HTTP/1.1\r\nHost: {host}\r\n")
        assert status.split()[1] == "200", host
        assert b"Tool calls" in body


def test_byref_lens_allow_host_adds_a_name(kinds_dir: Path) -> None:
    proc = subprocess.Popen([*BYREF, "lens", str(kinds_dir), "--allow-host", "lens.internal"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout is not None
        url = proc.stdout.readline().split()[2]
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        assert raw(port, f"GET / HTTP/1.1\r\nHost: lens.internal:{port}\r\n")[0].split()[1] == \
            "200"
        assert raw(port, f"GET / HTTP/1.1\r\nHost: other.internal:{port}\r\n")[0].split()[1] == \
            "421"
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))


NAMES = st.text(st.characters(codec="ascii", exclude_characters="\r\n"), max_size=40)


@given(NAMES, st.integers(1, 65535))
def test_only_an_allowed_authority_is_answered(host: str, port: int) -> None:
    allowed = allowed_hosts("127.0.0.1", port)
    answered = misdirected("/", host, allowed) is None
    assert answered == (host.strip().lower().rstrip(".") in allowed)
    if misdirected(f"http://{host}/", f"127.0.0.1:{port}", allowed) is None:
        assert answered or any(c in host for c in "/?#@")  # the Host header never counts


@given(st.sampled_from(["127.0.0.1", "localhost", "[::1]"]), st.integers(1, 65535))
def test_every_loopback_name_answers_in_any_case(name: str, port: int) -> None:
    allowed = allowed_hosts("127.0.0.1", port)
    assert misdirected("/", f"{name.upper()}:{port}", allowed) is None
    assert misdirected("/", name, allowed) is None if port == 80 else (
        misdirected("/", name, allowed) is not None)


def test_a_wildcard_address_answers_loopback_names_and_what_is_allowed() -> None:
    allowed = allowed_hosts("0.0.0.0", 8080, ["lens.example.com", "proxy.example:443"])
    assert allowed == {"127.0.0.1:8080", "localhost:8080", "[::1]:8080",
                       "lens.example.com:8080", "proxy.example:443"}


ALICE = "alice-lens-token-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the gateway serves HTTP with uvicorn, on asyncio


@pytest.mark.anyio
async def test_the_gateway_lens_answers_the_hosts_its_mcp_route_answers(tmp_path: Path) -> None:
    from byref.gateway import Gateway, listen_socket, serve_http
    from byref.gateway.config.file import parse_config

    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {
        "tokens": {ALICE: {"tenant": "acme", "principal": "alice"}},
        "store": f"file://{tmp_path / 'store'}"}}, source="test")
    with anyio.fail_after(scaled(60)):
        async with Gateway(config, errlog=io.StringIO()) as gateway:
            sock = listen_socket("127.0.0.1", 0)
            port = sock.getsockname()[1]
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))

                def probe() -> dict[str, Any]:
                    token = f"Authorization: Bearer {ALICE}\r\n"
                    return {
                        "evil": raw(port, "GET /lens/ HTTP/1.1\r\nHost: attacker.example\r\n"
                                    + token),
                        "evil-origin": raw(port, f"GET /lens/ HTTP/1.1\r\nHost: 127.0.0.1:{port}"
                                           f"\r\nOrigin: http://attacker.example\r\n" + token),
                        "mine": raw(port, f"GET /lens/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                    + token),
                        "mcp-evil": raw(port, "GET /mcp HTTP/1.1\r\nHost: attacker.example\r\n"
                                        + token),
                    }

                seen = await anyio.to_thread.run_sync(probe)
                group.cancel_scope.cancel()
            sock.close()
    assert seen["evil"][0].split()[1] == "421" and seen["mcp-evil"][0].split()[1] == "421"
    assert seen["evil-origin"][0].split()[1] == "403"
    assert seen["mine"][0].split()[1] == "200" and b"conversation" in seen["mine"][1]
