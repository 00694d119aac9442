"""moto's S3 API server on loopback, for every test that needs an S3-compatible store."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from _waits import scaled


@contextmanager
def moto_s3(*buckets: str) -> Iterator[str]:
    """Start moto's server on a free loopback port with `buckets` created; yield its endpoint.
    Skips (saying what to install) without obstore or boto3/moto; fails if it does not start."""
    pytest.importorskip("obstore", reason="obstore is not installed (byref[s3])")
    boto3 = pytest.importorskip("boto3", reason="boto3 (with moto[server]) is not installed")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(timeout=scaled(30))
    if starter.is_alive():
        pytest.fail("moto's S3 server did not start within 30 s")
    try:
        host, port = server.get_host_and_port()
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1"}.items():
            os.environ.setdefault(key, value)  # spawned children (gateways) inherit these
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
