"""What the gateway's code-mode tests share: a sandbox or a skip saying why not, and the
fixture upstream whose tools the programs call (tests/gateway/fixtures/code_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from _gateway_rig import FIXTURES

from _waits import scaled
from byref.tools.run_python.sandbox import Sandbox


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")


def code_server(tmp_path: Path) -> dict[str, Any]:
    """The `code` upstream over stdio; what it deletes is logged under `tmp_path`."""
    return {"code": {"command": sys.executable, "args": [str(FIXTURES / "code_server.py")],
                     "env": {"CODE_SERVER_LOG": str(tmp_path / "deleted.log")},
                     "timeout": scaled(60)}}
