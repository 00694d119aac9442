"""The container tests' team image (byref's image plus the code fixture server in a second
stage), built once per session (tests/_podman.py)."""

from __future__ import annotations

import time

import pytest
from _container_rig import FIXTURE

import _podman


@pytest.fixture(scope="session")
def team_image() -> str:
    reason = _podman.unavailable()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    _podman.byref_image()
    image = _podman.team_image({"code_server.py": FIXTURE}, "localhost/byref-test-team:latest")
    print(f"images built in {time.monotonic() - started:.1f} s; byref image "
          f"{_podman.image_size(_podman.IMAGE) / 1e6:.0f} MB")
    return image


