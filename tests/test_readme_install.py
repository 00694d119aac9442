"""The README's install and hook-up lines, run as printed from a bare clone.

A bare clone is the repository's tracked files as `git clone` would check them out (with this
worktree's uncommitted edits: `git stash create`), no .venv, no node_modules, and a fresh HOME, so
`make install` puts byref where a newcomer's would go. The printed hook-up commands are then
started as an MCP client starts them and must answer a handshake. These tests install packages
(from the configured index) and take minutes; they need git and make.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _waits import scaled

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTALL_TIMEOUT = 900

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None,
                                reason="needs git and make to clone and install")


def bare_clone(dest: Path) -> Path:
    """The tree a `git clone` would hold (this worktree's tracked edits included)."""
    stash = subprocess.run(["git", "stash", "create"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip() or "HEAD"
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", stash], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    assert not (dest / ".venv").exists() and not (dest / "node_modules").exists()
    return dest


def newcomer_env(home: Path, *, local_bin: bool = True) -> dict[str, str]:
    """A fresh HOME, with its ~/.local/bin on PATH (as a login shell adds it) unless not
    `local_bin`; pip keeps its usual cache, so packages are not fetched again."""
    real_cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"],
                                capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "OPENAI_"))}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not p.startswith(str(ROOT))]  # not this worktree's .venv/bin
    env |= {"HOME": str(home), "PATH": os.pathsep.join(
        [str(home / ".local" / "bin")] * local_bin + path)}
    if real_cache:
        env["PIP_CACHE_DIR"] = real_cache
    home.mkdir(parents=True, exist_ok=True)
    return env


def sh_block(section: str) -> list[str]:
    """The command lines of the first ```sh block under a README heading."""
    text = README.read_text().split(f"## {section}\n", 1)[1].split("\n## ")[0]
    [block] = re.findall(r"```sh\n(.*?)```", text, flags=re.S)[:1]
    return [line for line in block.strip().splitlines() if line.strip()]


def bash(line: str, cwd: Path, env: dict[str, str], timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def expand(words: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """`words` as bash expands them (~, $PWD, quotes), one argument each."""
    done = bash(f'args=({words}); printf "%s\\0" "${{args[@]}}"', cwd, env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def handshake(argv: list[str], env: dict[str, str]) -> list[str]:
    """Start `argv` as an MCP client starts a stdio server; the tool names it lists."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main() -> list[str]:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
        with anyio.fail_after(scaled(60)):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return [t.name for t in (await s.list_tools()).tools]

    return anyio.run(main)


def gateway_config(clone: Path) -> Path:
    """gateway.json in the clone with one real server (mcp-server-time, beside this Python when
    it is there); the hook-up is what is tested: the first turn needs no upstream."""
    server = Path(sys.executable).parent / "mcp-server-time"
    command = str(server) if server.is_file() else "mcp-server-time"
    path = clone / "gateway.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": command}}}))
    return path


def test_make_install_and_the_hookup_lines_work_as_printed_from_a_bare_clone(
        tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the handshake uses the MCP SDK's client")
    clone = bare_clone(tmp_path / "byref")
    home = tmp_path / "home"
    env = newcomer_env(home, local_bin=False)  # the harder case: the lines must not need it
    gateway_config(clone)
    lines = sh_block("byref gateway: any MCP client, one config file")
    assert lines[0].split("#")[0].strip() == "make install"
    claude_bin = ROOT / "node_modules" / ".bin" / "claude"
    installed = home / ".local" / "share" / "byref" / "venv"
    for line in lines:
        command = line.split("  #")[0].strip()
        if command.startswith("claude "):
            assert command.startswith("claude mcp add byref -- ")
            argv = expand(command.removeprefix("claude mcp add byref -- "), clone, env)
            assert Path(argv[0]).is_file() and os.access(argv[0], os.X_OK), argv
            helped = subprocess.run([argv[0], "--help"], capture_output=True, text=True,
                                    env=env, timeout=scaled(60))
            assert helped.returncode == 0 and "gateway" in helped.stdout
            assert "search_tools" in handshake(argv, env)
            if claude_bin.is_file():  # Claude Code itself, as the line is printed
                path = os.pathsep.join([str(claude_bin.parent), env["PATH"]])
                added = bash(command, clone, env | {"PATH": path})
                assert added.returncode == 0, added.stdout + added.stderr
                listed = bash("claude mcp list", clone, env | {"PATH": path}, timeout=scaled(120))
                assert re.search(r"byref: .*Connected", listed.stdout), listed.stdout
            continue
        done = bash(command, clone, env, timeout=INSTALL_TIMEOUT)
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"
        if command == "make install":
            assert (home / ".local" / "bin" / "byref").resolve() == (
                installed / "bin" / "byref").resolve()
            assert f"Note: {home / '.local' / 'bin'} is not on your PATH" in done.stdout
            assert re.search(r"^byref \d+\.\d+\.\d+ ", done.stdout, flags=re.M), done.stdout
        elif command.endswith("--json"):
            entry = json.loads(done.stdout)["mcpServers"]["byref"]
            assert Path(entry["command"]).is_absolute()
            assert "search_tools" in handshake([entry["command"], *entry["args"]], env)
        elif "/byref hookup" in command:
            [claude_line] = [ln.strip() for ln in done.stdout.splitlines()
                             if ln.strip().startswith("claude mcp add")]
            argv = shlex.split(claude_line)[5:]
            assert argv[:2] == [str(installed / "bin" / "byref"), "gateway"], argv
            assert argv[2:] == ["--config", str(clone / "gateway.json")]
    # An install hint from this installation is a line that works: this venv's pip, the clone.
    hint = subprocess.run([str(installed / "bin" / "python"), "-c",
                           "from byref.errors import install_hint; print(install_hint('s3'))"],
                          capture_output=True, text=True, check=True, env=env).stdout.strip()
    assert hint == (f"{installed / 'bin' / 'python'} -m pip install "
                    f"{shlex.quote(str(clone) + '[s3]')}")
    dry = bash(f"{hint} --dry-run --quiet", clone, env, timeout=INSTALL_TIMEOUT)
    assert dry.returncode == 0, dry.stderr
    # docs/TEAM.md's line installs those extras into the same venv (resolved, not run).
    [team] = re.findall(r"`(make install EXTRAS=[\w,-]+)`",
                        (ROOT / "docs" / "TEAM.md").read_text())
    planned = bash(team.replace("make install", "make -n install"), clone, env)
    [pip_line] = [ln for ln in planned.stdout.splitlines() if "pip install --quiet '." in ln]
    dry = bash(f"{pip_line} --dry-run", clone, env, timeout=INSTALL_TIMEOUT)
    assert dry.returncode == 0 and team.split("=")[1] in pip_line, dry.stderr


def test_make_demo_from_a_bare_clone_installs_what_byref_gateway_needs(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the handshake uses the MCP SDK's client")
    clone = bare_clone(tmp_path / "byref")
    env = newcomer_env(tmp_path / "home")
    top = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)[0]
    assert [ln.split("#")[0].strip() for ln in top.strip().splitlines()] == [
        "make demo", "make test"]
    done = bash("make demo", clone, env, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rows byte-identical" in done.stdout
    byref = clone / ".venv" / "bin" / "byref"
    config = gateway_config(clone)
    assert "search_tools" in handshake([str(byref), "gateway", "--config", str(config)], env)


FRAMEWORKS = [  # README order: each block runs after its own line and the ones before it
    ("pydantic-ai", "byref.integrations.pydantic_ai"),
    ("langchain", "byref.integrations.langchain"),
    ("openai-agents", "byref.integrations.openai_agents"),
]


def test_framework_install_lines_give_what_each_block_needs(tmp_path: Path) -> None:
    """Each framework's `pip install '.[extra]'` line, as printed, in one fresh venv in README
    order; after each, its example (the key set, `ChatStandIn` on loopback playing the model on
    the Responses API) and its offline twin (no key) run in that venv and print what they say."""
    clone = bare_clone(tmp_path / "byref")
    env = newcomer_env(tmp_path / "home")
    venv = tmp_path / "project"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=scaled(300))
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env["PATH"]])
    section = README.read_text().split("## Inside pydantic-ai", 1)[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    for extra, marker in FRAMEWORKS:
        [line] = {m for m in re.findall(r"`(pip install '[^`]*')`", section)
                  if f"[{extra}]" in m}
        done = bash(line, clone, env, timeout=INSTALL_TIMEOUT)
        assert done.returncode == 0, f"{line!r}: {done.stderr[-2000:]}"
        for code in [b for b in blocks if marker in b]:
            out = run_in(venv, code, env, twin="ChatStandIn" in code)
            expected = re.search(r"print\(.*\)\s+# (.+)", code)
            assert expected is not None
            assert out == expected.group(1).strip(), (extra, out)


PLAYED = """
import json, os, runpy, sys
from byref.testing import ChatStandIn, call, last_result, say
script = [call("export_orders", {"month": "March"}),
          call("total", lambda r: {"orders": last_result(r)["value"]}),
          lambda r: say(str(last_result(r)))]
if "from agents" in open(sys.argv[1]).read():
    from agents import set_tracing_disabled
    set_tracing_disabled(True)
with ChatStandIn(script):  # the key is set: the example as a user with one runs it
    runpy.run_path(sys.argv[1], run_name="readme")
"""


def run_in(venv: Path, code: str, env: dict[str, str], *, twin: bool) -> str:
    """Run a README block with the venv's Python: a twin as it is (no key in the
    environment); an example with its OpenAI model answered on loopback, a key set."""
    work = venv / "readme_block.py"
    work.write_text(code)
    argv: list[str | Any] = [str(venv / "bin" / "python"), str(work)]
    if not twin:
        runner = venv / "readme_played.py"
        runner.write_text(PLAYED)
        argv = [str(venv / "bin" / "python"), str(runner), str(work)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()
