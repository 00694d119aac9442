"""Opening a store from a URL: an unreachable or mis-written one is one line on stderr and exit 2
at every CLI door, and an S3 URL never sends a request to an address it did not name."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from _waits import scaled
from byref.cli import main
from byref.store import StoreUnavailableError, StoreURLError, open_store


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LISTING = (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com'
           b'/doc/2006-03-01/"><Name>bkt</Name><Prefix>p/probe/</Prefix><KeyCount>0</KeyCount>'
           b"<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>"
           b"</ListBucketResult>")


class Recorder:
    """A loopback HTTP server that records every request; it answers S3 listings (or 404)."""

    def __init__(self, *, s3: bool) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.requests.append(
                    (self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                body = LISTING if s3 and self.command == "GET" else b""
                self.send_response(200 if body else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = _answer

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=scaled(10))


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """No credentials anywhere, and the instance-metadata address pointed at a recorder, so a
    probe of it is seen instead of leaving the machine."""
    pytest.importorskip("obstore")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_TOKEN",
                "AWS_SKIP_SIGNATURE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    metadata = Recorder(s3=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", metadata.url)
    yield metadata
    metadata.close()


def test_custom_endpoint_without_credentials_goes_unsigned_and_nowhere_else(
    no_aws_credentials: Recorder,
) -> None:
    server = Recorder(s3=True)
    try:
        store = open_store(f"s3://bkt/p?endpoint={server.url}&region=us-east-1")
    finally:
        server.close()
    assert store.unsigned is True  # type: ignore[attr-defined]
    assert store._store.config.get("skip_signature") == "true"  # type: ignore[attr-defined]
    assert no_aws_credentials.requests == []  # the metadata address was never asked
    assert server.requests and all("authorization" not in h for _, _, h in server.requests)
    assert store.url == f"s3://bkt/p?endpoint={server.url.replace(':', '%3A').replace('/', '%2F')}&region=us-east-1"  # noqa: E501


def test_credentials_in_the_environment_still_sign(
    no_aws_credentials: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    server = Recorder(s3=True)
    try:
        store = open_store(f"s3://bkt/p?endpoint={server.url}&region=us-east-1")
    finally:
        server.close()
    assert store.unsigned is False  # type: ignore[attr-defined]
    assert no_aws_credentials.requests == []
    assert server.requests and all("authorization" in h for _, _, h in server.requests)


def test_unsigned_refusal_says_it_was_unsigned(no_aws_credentials: Recorder) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailableError) as info:
        open_store(f"s3://nowhere/p?endpoint={endpoint}&region=us-east-1")
    text = str(info.value)
    assert text.startswith(f"Cannot reach bucket 'nowhere' at {endpoint!r}: ")
    assert text.endswith(" (no AWS credentials were found, so it was sent unsigned). Check that "
                         "the server is running, the bucket exists and the AWS credentials are "
                         "set.")
    assert no_aws_credentials.requests == []


def test_unknown_postgres_option_is_a_url_error() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StoreURLError) as info:
        open_store("postgresql://root:hunter2@127.0.0.1:1/x?colour=red")
    assert str(info.value).startswith(
        "Store URL 'postgresql://root:***@127.0.0.1:1/x?colour=red' is not a valid PostgreSQL "
        "connection string: ")
    assert str(info.value).endswith(". Options are libpq's (sslmode, connect_timeout, …) plus "
                                    "table, ttl, max_bytes, max_count.")
    assert "hunter2" not in str(info.value)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("kind", ["postgres", "s3", "postgres-option"])
def test_store_cli_unreachable_store_is_one_line_exit_2(
    kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg" if kind.startswith("postgres") else "obstore")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    port = free_port()
    url = {"postgres": f"postgresql://127.0.0.1:{port}/x",
           "postgres-option": f"postgresql://127.0.0.1:{port}/x?colour=red",
           "s3": f"s3://b/p?endpoint=http://127.0.0.1:{port}&region=us-east-1"}[kind]
    assert main(["store", "ls", url, "--tenant", "t"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: Cannot reach " if kind != "postgres-option"
                           else "error: Store URL ")


def test_gateway_with_an_unreachable_store_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("psycopg")
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"x": {"command": "true"}}}))
    url = f"postgresql://127.0.0.1:{free_port()}/x"
    assert main(["gateway", "--config", str(config), "--store", url]) == 2
    assert _one_line(capsys.readouterr().err).startswith(
        f"byref gateway: Cannot reach PostgreSQL at {url!r}: ")
