"""The official MCP conformance suite's client scenarios, run against byref's upstream side.

The suite (npm `conformance-next`: @modelcontextprotocol/conformance 0.2.0-alpha.12, the newest
release; the server scenarios stay on 0.1.16 in `edge/test_gateway_conformance.py`) starts each
scenario's server; `fixtures/conformance_client.py` puts a gateway in front of it, as a user
would configure one, and drives it through the official client, so byref is the client under
test. Every client scenario a revision requires runs at that revision's wire (its requirement
set, read from the suite), one at a time (a gateway starts for each: run together on two cores
they outlast the suite's timeout), and must pass every check — except the authorization ones,
each failing for the reason in `NOT_SUPPORTED`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / "node_modules" / ".bin" / "node"
SUITE = ROOT / "node_modules" / "conformance-next" / "dist" / "index.js"
DRIVER = Path(__file__).parents[1] / "fixtures" / "conformance_client.py"
RUN_TIMEOUT = 120
SCENARIO_TIMEOUT_MS = 60_000

SCENARIOS = {
    "2025-11-25": ["initialize", "tools_call", "elicitation-sep1034-client-defaults",
                   "sse-retry", "json-schema-2020-12-preservation"],
    "2026-07-28": ["tools_call", "request-metadata", "sep-2322-client-request-state",
                   "http-standard-headers", "http-custom-headers", "http-invalid-tool-headers",
                   "json-schema-ref-no-deref", "json-schema-2020-12-preservation"],
}
"""The client scenarios each revision's requirement set names (with those it runs unscored,
extensions aside), authorization aside."""
NOT_SUPPORTED = {
    "auth/": "byref's upstream side runs no OAuth flow: an upstream's credentials are the "
             "headers its config entry gives (a 401 is reported as the server's answer)",
}
"""Client scenarios byref does not pass, by name prefix, each with its reason."""

pytestmark = pytest.mark.skipif(
    not (NODE.exists() and SUITE.exists()),
    reason="the conformance suite and Node 22 come from npm: run `make upstreams`")


def _listed(revision: str) -> set[str]:
    """The client scenarios `revision`'s requirement set runs (scored or not; extensions
    aside), as the suite lists them."""
    done = subprocess.run([str(NODE), str(SUITE), "list", "--client", "--requirements",
                           revision], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    out = done.stdout
    required = out.split("Client scenarios", 1)[1].split("Run and reported", 1)[0]
    names = set(re.findall(r"^\s+- (\S+)$", required, re.M))
    unscored = out.split("Run and reported", 1)[1] if "Run and reported" in out else ""
    for section in re.split(r"^\s+(?=\S+ \(\d+\):$)", unscored, flags=re.M):
        if not section.startswith("extension"):
            names |= set(re.findall(r"^\s+- (\S+) \[client\]$", section, re.M))
    return names


def _run(revision: str, scenario: str, out: Path) -> list[dict[str, Any]]:
    """The scored checks of one scenario run against the driver (SUCCESS, FAILURE, WARNING)."""
    command = f"{sys.executable} {DRIVER}"
    done = subprocess.run([str(NODE), str(SUITE), "client", "--command", command, "--scenario",
                           scenario, "--spec-version", revision, "--timeout",
                           str(SCENARIO_TIMEOUT_MS), "-o", str(out)], cwd=out,
                          env={**os.environ, "NO_COLOR": "1"}, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    found = sorted(out.rglob("checks.json"))
    assert found, done.stdout[-3000:] + done.stderr[-3000:]
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text())
    return [c for c in checks if c.get("status") in ("SUCCESS", "FAILURE", "WARNING")]


@pytest.mark.parametrize("revision", sorted(SCENARIOS))
def test_the_scenarios_run_are_every_client_scenario_the_revision_requires(revision: str) -> None:
    listed = _listed(revision)
    unsupported = {n for n in listed if any(n.startswith(p) for p in NOT_SUPPORTED)}
    assert listed - unsupported == set(SCENARIOS[revision])


@pytest.mark.parametrize(("revision", "scenario"), [
    (revision, scenario) for revision, names in sorted(SCENARIOS.items()) for scenario in names])
def test_byref_passes_every_check_of_a_client_scenario(revision: str, scenario: str,
                                                       tmp_path: Path) -> None:
    checks = _run(revision, scenario, tmp_path)
    failed = [f"{c['id']}: {c.get('errorMessage') or c.get('description')}" for c in checks
              if c["status"] != "SUCCESS"]
    assert checks and not failed, failed
