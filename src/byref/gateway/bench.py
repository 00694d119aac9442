"""`byref bench gateway`: what the gateway costs per call, and what it saves on the first turn.

Owns two figures, each against a baseline from the same run. (1) Per-call overhead: the same
upstream tool (mcp-server-time's `get_current_time`) called directly over stdio and through
`byref gateway` over stdio, sequential calls after a warm-up, p50/p95 latencies and their ratio.
(2) First-turn tool surface: the tool declarations (name, description, input schema — what a
client hands the model) of the four reference servers connected directly, versus the gateway's
declarations plus its instructions, in characters and tokens. The law: the figures are measured,
never assumed; a reference server that is not installed is named in `missing` and left out of
both sides of the comparison, never silently counted.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from byref.harness.tokens import count_tokens

_ROOT_MARKERS = ("pyproject.toml", "package.json")


def repo_roots() -> list[Path]:
    """Where the reference servers may be installed: the working directory and the source tree."""
    here = Path(__file__).resolve()
    roots = [Path.cwd(), *here.parents]
    seen: list[Path] = []
    for r in roots:
        if r not in seen and any((r / m).exists() for m in _ROOT_MARKERS):
            seen.append(r)
    return seen


def _program(name: str, *extra: Path) -> str | None:
    for candidate in extra:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name)


def reference_servers(repo: Path, files: Path, db: Path
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """`mcpServers` entries for the four reference servers, and why any is missing.

    `repo` is a git repository for mcp-server-git, `files` the directory mcp-server-filesystem may
    touch, `db` the SQLite file for mcp-server-sqlite (which needs the 1.x SDK, so it is looked
    for in its own virtualenv, `.venv-sqlite`, first; `BYREF_MCP_SQLITE` overrides).
    """
    roots = repo_roots()
    servers: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    time_cmd = _program("mcp-server-time")
    if time_cmd:
        servers["time"] = {"command": time_cmd, "args": ["--local-timezone", "UTC"]}
    else:
        missing["time"] = "mcp-server-time is not installed (pip install mcp-server-time)"
    git_cmd = _program("mcp-server-git")
    if git_cmd:
        servers["git"] = {"command": git_cmd, "args": ["--repository", str(repo)]}
    else:
        missing["git"] = "mcp-server-git is not installed (pip install mcp-server-git)"
    override = os.environ.get("BYREF_MCP_SQLITE")
    sqlite_cmd = override or _program(
        "mcp-server-sqlite", *(r / ".venv-sqlite" / "bin" / "mcp-server-sqlite" for r in roots))
    if sqlite_cmd and (override or ".venv-sqlite" in sqlite_cmd):
        servers["sqlite"] = {"command": sqlite_cmd, "args": ["--db-path", str(db)]}
    else:
        missing["sqlite"] = ("mcp-server-sqlite needs the 1.x MCP SDK in its own virtualenv: "
                             "python3 -m venv .venv-sqlite && .venv-sqlite/bin/pip install "
                             "'mcp-server-sqlite==2025.4.25' 'mcp>=1.6,<2'")
    fs = [r / "node_modules" / ".bin" / "mcp-server-filesystem" for r in roots]
    fs_cmd = next((str(p) for p in fs if p.exists()), None)
    if fs_cmd and shutil.which("node"):
        servers["filesystem"] = {"command": fs_cmd, "args": [str(files)]}
    else:
        missing["filesystem"] = ("@modelcontextprotocol/server-filesystem is not installed "
                                 "(node and `npm ci` at the repository root)")
    return servers, missing


def make_repo(path: Path, commits: int = 3) -> Path:
    """A small git repository with a few commits (for mcp-server-git)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "byref", "GIT_AUTHOR_EMAIL": "byref@example.com",
           "GIT_COMMITTER_NAME": "byref", "GIT_COMMITTER_EMAIL": "byref@example.com"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    for i in range(commits):
        (path / f"note{i}.txt").write_text(f"note {i}\n")
        subprocess.run(["git", "-C", str(path), "add", "."], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", f"Add note {i}"],
                       check=True, env=env)
    return path


def _declarations(tools: list[Any]) -> list[dict[str, Any]]:
    # What a client hands the model for each tool: name, description, input schema.
    return [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in tools]


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _latencies(params: StdioServerParameters, tool: str, args: dict[str, Any],
                     calls: int, warmup: int) -> list[float]:
    out: list[float] = []
    with anyio.fail_after(120 + calls * 5), open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:
            for i in range(warmup + calls):
                start = time.perf_counter()
                result = await client.call_tool(tool, args)
                elapsed = time.perf_counter() - start
                if result.is_error:
                    raise RuntimeError(f"{tool!r} failed during the benchmark: "
                                       f"{result.content!r}")
                if i >= warmup:
                    out.append(elapsed)
    return out


async def _surface(servers: dict[str, dict[str, Any]], config: Path) -> dict[str, Any]:
    direct: dict[str, int] = {}
    direct_text = []
    for name, entry in servers.items():
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        with anyio.fail_after(120), open(os.devnull, "w") as quiet:
            async with Client(stdio_client(params, errlog=quiet)) as client:
                listed = await client.list_tools()
        text = json.dumps(_declarations(listed.tools))
        direct[name] = len(listed.tools)
        direct_text.append(text)
    gateway = _gateway_params(config)
    with anyio.fail_after(120), open(os.devnull, "w") as quiet:
        async with Client(stdio_client(gateway, errlog=quiet)) as client:
            listed = await client.list_tools()
            instructions = client.instructions
    gateway_text = json.dumps(_declarations(listed.tools)) + (instructions or "")
    joined = "".join(direct_text)
    direct_tokens, gateway_tokens = count_tokens(joined), count_tokens(gateway_text)
    return {
        "servers": direct,
        "direct_tools": sum(direct.values()),
        "direct_chars": len(joined),
        "direct_tokens": direct_tokens,
        "gateway_tools": len(listed.tools),
        "gateway_chars": len(gateway_text),
        "gateway_tokens": gateway_tokens,
        "ratio_tokens": round(gateway_tokens / max(direct_tokens, 1), 3),
    }


def _gateway_params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "byref.cli", "gateway", "--config", str(config)],
        env={k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "PATH")})


async def gateway_bench_async(calls: int = 50, warmup: int = 5) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="byref-bench-gateway-") as tmp:
        root = Path(tmp)
        files = root / "files"
        files.mkdir()
        servers, missing = reference_servers(make_repo(root / "repo"), files, root / "bench.db")
        config = root / "gateway.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        report: dict[str, Any] = {"missing": missing}
        if "time" in servers:
            t = servers["time"]
            args = {"timezone": "UTC"}
            direct = await _latencies(StdioServerParameters(command=t["command"], args=t["args"]),
                                      "get_current_time", args, calls, warmup)
            via = await _latencies(_gateway_params(config), "time__get_current_time", args,
                                   calls, warmup)
            report["overhead"] = {
                "upstream": "mcp-server-time get_current_time", "calls": calls,
                "direct_p50_ms": round(statistics.median(direct) * 1e3, 3),
                "direct_p95_ms": round(_pct(direct, 0.95) * 1e3, 3),
                "gateway_p50_ms": round(statistics.median(via) * 1e3, 3),
                "gateway_p95_ms": round(_pct(via, 0.95) * 1e3, 3),
                "ratio_p50": round(statistics.median(via) / statistics.median(direct), 2),
                "ratio_p95": round(_pct(via, 0.95) / _pct(direct, 0.95), 2),
                "overhead_p50_ms": round((statistics.median(via) - statistics.median(direct))
                                         * 1e3, 3),
            }
        if servers:
            report["first_turn"] = await _surface(servers, config)
        return report


def gateway_bench(calls: int = 50, warmup: int = 5) -> dict[str, Any]:
    return anyio.run(gateway_bench_async, calls, warmup)
