"""What a newcomer's first commands print: `--version`, a missing subcommand, an empty store
listing, a long demo's stages, `byref hookup`, the install hints and an unreachable model
server. Each message is pinned."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import byref
from _waits import scaled
from byref.cli import main
from byref.errors import install_hint

ROOT = Path(__file__).resolve().parents[1]


def byref_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "byref.cli", *args], capture_output=True,
                          text=True, timeout=scaled(120))


def test_version_names_the_release_and_the_python_running_it() -> None:
    done = byref_cli("--version")
    assert done.returncode == 0
    assert done.stdout == (f"byref {byref.__version__} (Python {sys.version.split()[0]}, "
                           f"{sys.executable})\n")


@pytest.mark.parametrize(("args", "choices"), [
    ((), "{demo,bench,eval,store,tools,trace,gateway,hookup,lens,conformance}"),
    (("store",), "{check,ls,head,get,rm}"),
    (("bench",), None),
    (("tools",), None),
])
def test_a_missing_subcommand_names_the_choices_not_an_internal_name(
        args: tuple[str, ...], choices: str | None) -> None:
    done = byref_cli(*args)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "_command" not in done.stderr and "dest" not in done.stderr
    named = re.fullmatch(r"byref.*: error: the following arguments are required: (\{.+\})", last)
    assert named is not None, last
    if choices is not None:
        assert named.group(1) == choices


def test_an_empty_listing_names_the_scope_it_listed_and_what_to_pass(tmp_path: Path) -> None:
    from byref.store import FileStore, PutOptions, Scope

    store = FileStore(tmp_path / "store")
    store.put(Scope("demo", conversation="c0ffee"), b"{}", PutOptions(kind="tool_result"))
    store.close()
    url = f"file://{tmp_path / 'store'}"
    empty = byref_cli("store", "ls", url, "--tenant", "demo")
    assert (empty.returncode, empty.stdout) == (0, "")
    assert empty.stderr == (
        "byref store ls: no artifacts in tenant 'demo', principal 'default', conversation "
        "'default'. Artifacts are kept per conversation: pass the --conversation (and "
        "--principal) that stored them; a run's event trace names its scope (byref demo: "
        "byref-demo/trace.jsonl).\n")
    found = byref_cli("store", "ls", url, "--tenant", "demo", "--conversation", "c0ffee")
    assert found.returncode == 0 and "tool_result" in found.stdout and found.stderr == ""


def test_a_long_demo_names_each_stage_on_stderr_when_piped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A piped run from ANNOUNCED_FROM up says each stage as it starts (lowered here so the
    test runs a small export); the default size stays quiet (test_demo pins that)."""
    import byref.cli.demo as demo

    monkeypatch.setattr(demo, "ANNOUNCED_FROM", 0)
    assert main(["demo", "--size", "300KB", "--out", str(tmp_path), "--json"]) == 0
    err = capsys.readouterr().err
    stages = [re.sub(r" \(\d+ s so far\)$", "", ln) for ln in err.splitlines()]
    assert stages == [
        "byref demo: generating the export",
        "byref demo: reading the open rows the report must hold",
        "byref demo: running the agent through byref",
        "byref demo: running the naive harness",
    ]
    assert re.fullmatch(r"byref demo: generating the export \(0 s so far\)", err.splitlines()[0])


def test_hookup_prints_lines_that_start_this_installation(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="hookup checks the gateway's dependencies")
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"py": {"command": sys.executable}}}))
    script = Path(sys.executable).parent / "byref"
    argv = ([str(script)] if script.is_file() else [sys.executable, "-m", "byref.cli"]) + [
        "gateway", "--config", str(config)]
    done = subprocess.run([sys.executable, "-m", "byref.cli", "hookup", "--config",
                           "gateway.json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    entry = {"mcpServers": {"byref": {"command": argv[0], "args": argv[1:]}}}
    assert done.stdout == (
        "Claude Code:\n"
        f"  claude mcp add byref -- {shlex.join(argv)}\n"
        "Claude Desktop (claude_desktop_config.json), Cursor (~/.cursor/mcp.json) and other "
        "mcpServers files:\n"
        f"  {json.dumps(entry)}\n")
    as_json = byref_cli("hookup", "--config", str(config), "--json", "--name", "refs")
    assert json.loads(as_json.stdout) == {"mcpServers": {"refs": entry["mcpServers"]["byref"]}}
    missing = byref_cli("hookup", "--config", str(tmp_path / "nope.json"))
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == (f"byref hookup: Config file {str(tmp_path / 'nope.json')!r} does "
                              "not exist.\n")
    ghost = tmp_path / "ghost.json"  # a server whose command is nowhere: refused, not printed
    ghost.write_text(json.dumps({"mcpServers": {"ghost": {"command": "no-such-mcp-server"}}}))
    refused = byref_cli("hookup", "--config", str(ghost))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith(
        f"byref hookup: server 'ghost' in {str(ghost)!r} would not start: its command "
        "'no-such-mcp-server' is not found (not on PATH, nor a file from "), refused.stderr


def test_an_install_hint_is_this_pythons_pip_and_the_clone_byref_came_from() -> None:
    """byref is on no index: a hint names the directory pip recorded (this worktree, editable)
    and the interpreter running byref, so it installs where byref runs."""
    assert install_hint("mcp") == f"{sys.executable} -m pip install '{ROOT}[mcp]'"
    missing_mcp = ("import sys; sys.modules['mcp'] = None; from byref.cli import main; "
                   "sys.exit(main(['gateway', '--config', 'x.json']))")
    done = subprocess.run([sys.executable, "-c", missing_mcp], capture_output=True, text=True,
                          timeout=scaled(120))
    assert done.returncode == 2
    assert done.stderr == (f"byref gateway: the MCP SDK is not installed; run: "
                           f"{install_hint('mcp')}\n")


def test_an_unreachable_model_server_is_named_with_its_address() -> None:
    pytest.importorskip("openai", reason="needs the openai extra")
    from byref.harness.providers import ProviderError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = byref.model_from_id("openai-chat:llama3.1", base_url=f"http://127.0.0.1:{port}/v1",
                                max_retries=0)
    with pytest.raises(ProviderError) as info:
        byref.Harness(model, []).run_sync("hello")
    assert str(info.value) == (
        f"Could not reach the openai-chat API for model 'llama3.1' at "
        f"'http://127.0.0.1:{port}/v1/chat/completions': All connection attempts failed. Check "
        "that a server answers there (a local one must be running).")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_gateway_help_names_tokens_defaults_and_modes() -> None:
    helped = byref_cli("gateway", "--help")
    assert helped.returncode == 0, helped.stderr
    said = " ".join(helped.stdout.split())
    for words in ('every request needs "Authorization: Bearer <token>"', "byref.tokens",
                  '"search" [default]', '"direct": every upstream tool declared',
                  "Claude Code works with either", "[60]", "[memory://;",
                  "Relative paths in the config are taken from the config file's folder",
                  "examples/gateway.json"):
        assert words in said, words
