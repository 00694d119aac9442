"""The config users already have: `disabled`, `tools` allow/deny globs, `${VAR}` expansion, the
transport `type`, VS Code's `servers` shape, and the byref block's mode/alwaysLoad/callTool. Every
refusal is one line, pinned here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.gateway.config.file import ConfigError, load_config, parse_config


def _one(entry: dict[str, Any], environ: dict[str, str] | None = None,
         **byref: Any) -> Any:
    config = parse_config({"mcpServers": {"s": entry}, "byref": byref}, source="c.json",
                          environ=environ or {})
    (server,) = config.servers
    return server


def _refused(raw: Any, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, source="c.json", environ=environ or {})
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_disabled_servers_are_left_out_and_the_flag_must_be_a_boolean() -> None:
    config = parse_config({"mcpServers": {"on": {"command": "a"},
                                          "off": {"command": "b", "disabled": True},
                                          "kept": {"command": "c", "disabled": False}}},
                          environ={})
    assert [s.name for s in config.servers] == ["on", "kept"]
    assert _refused({"mcpServers": {"x": {"command": "a", "disabled": "yes"}}}) == (
        "Config 'c.json' server 'x': 'disabled' must be true or false, got 'yes'.")


def test_a_disabled_server_is_not_checked_further() -> None:
    # A half-written entry a user switched off must not stop the gateway starting.
    config = parse_config({"mcpServers": {"on": {"command": "a"},
                                          "draft": {"disabled": True, "args": "oops"}}},
                          environ={})
    assert [s.name for s in config.servers] == ["on"]


def test_tool_filters_are_globs_allow_first_then_deny() -> None:
    server = _one({"command": "x", "tools": {"allow": ["read_*", "list*"],
                                             "deny": ["*_secret"]}})
    kept = [t for t in ("read_file", "read_secret", "list", "write_file") if server.keeps(t)]
    assert kept == ["read_file", "list"]
    only_deny = _one({"command": "x", "tools": {"deny": ["delete_*"]}})
    assert only_deny.keeps("read") and not only_deny.keeps("delete_repo")
    assert _one({"command": "x"}).keeps("anything")


@pytest.mark.parametrize(("tools", "message"), [
    (["a"], "Config 'c.json' server 's': 'tools' must be {\"allow\": [globs], \"deny\": [globs]}, "
            "got ['a']."),
    ({"allow": ["a"], "block": ["b"]},
     "Config 'c.json' server 's': 'tools' must be {\"allow\": [globs], \"deny\": [globs]}, got "
     "{'allow': ['a'], 'block': ['b']}."),
    ({"deny": "b*"}, "Config 'c.json' server 's': 'tools.deny' must be a list of tool-name globs, "
                     "got 'b*'."),
])
def test_bad_tool_filters_are_one_line_errors(tools: Any, message: str) -> None:
    assert _refused({"mcpServers": {"s": {"command": "x", "tools": tools}}}) == message


def test_variables_expand_in_command_args_env_url_and_headers() -> None:
    environ = {"BIN": "/opt/bin", "KEY": "k-123", "HOST": "h.example", "EMPTY": ""}
    server = _one({"command": "${BIN}/srv", "args": ["--key=${KEY}", "${MISSING:-fallback}",
                                                     "${EMPTY:-d}", "x${EMPTY}y"],
                   "env": {"API_KEY": "${KEY}", "PLAIN": "$KEY stays"}}, environ)
    assert server.command == "/opt/bin/srv"
    assert server.args == ("--key=k-123", "fallback", "d", "xy")
    assert server.env == {"API_KEY": "k-123", "PLAIN": "$KEY stays"}
    remote = _one({"url": "https://${HOST}/mcp",
                   "headers": {"Authorization": "Bearer ${KEY}"}}, environ)
    assert remote.url == "https://h.example/mcp"
    assert remote.headers == {"Authorization": "Bearer k-123"}


@pytest.mark.parametrize(("entry", "message"), [
    ({"command": "srv", "args": ["--key", "${API_KEY}"]},
     "Config 'c.json' server 's': 'args[1]' uses ${API_KEY}, which is not set; set it or write "
     "${API_KEY:-default}."),
    ({"command": "${SRV}"},
     "Config 'c.json' server 's': 'command' uses ${SRV}, which is not set; set it or write "
     "${SRV:-default}."),
    ({"command": "srv", "env": {"TOKEN": "${TOKEN}"}},
     "Config 'c.json' server 's': 'env.TOKEN' uses ${TOKEN}, which is not set; set it or write "
     "${TOKEN:-default}."),
    ({"url": "https://${HOST}/mcp"},
     "Config 'c.json' server 's': 'url' uses ${HOST}, which is not set; set it or write "
     "${HOST:-default}."),
    ({"url": "https://h/mcp", "headers": {"X-Key": "${K}"}},
     "Config 'c.json' server 's': 'headers.X-Key' uses ${K}, which is not set; set it or write "
     "${K:-default}."),
    ({"command": "srv", "args": ["${input:api-key}"]},
     "Config 'c.json' server 's': 'args[0]' has '${input:api-key}', which is not ${VAR} or "
     "${VAR:-default}."),
    ({"url": "${U:-ftp://x}"},
     "Config 'c.json' server 's': 'url' must be an http:// or https:// URL, got 'ftp://x'."),
])
def test_an_unset_variable_is_a_one_line_error(entry: dict[str, Any], message: str) -> None:
    assert _refused({"mcpServers": {"s": entry}}) == message


@given(st.text(alphabet=st.characters(blacklist_characters="${}", blacklist_categories=("Cs",)),
               max_size=40))
def test_text_without_a_variable_is_kept_exactly(text: str) -> None:
    server = _one({"command": "x", "args": [text], "env": {"V": text}})
    assert server.args == (text,) and server.env == {"V": text}


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
       st.text(alphabet=st.characters(blacklist_characters="}", blacklist_categories=("Cs",)),
               min_size=1, max_size=20))
def test_a_set_variable_wins_over_its_default(name: str, value: str) -> None:
    environ = {name: value}
    assert _one({"command": "x", "args": [f"<${{{name}:-other}}>"]}, environ).args == (
        f"<{value}>",)
    assert _one({"command": "x", "args": [f"<${{{name}}}>"]}, environ).args == (f"<{value}>",)


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYREF_TEST_SRV", "from-env")
    config = parse_config({"mcpServers": {"s": {"command": "${BYREF_TEST_SRV}"}}})
    assert config.servers[0].command == "from-env"


def test_type_names_the_transport_and_must_agree_with_the_entry() -> None:
    assert _one({"command": "x"}).transport == "stdio"
    assert _one({"url": "http://h/mcp"}).transport == "http"
    assert _one({"type": "sse", "url": "http://h/sse"}).transport == "sse"
    assert _one({"type": "http", "url": "http://h/mcp"}).transport == "http"
    assert _one({"type": "stdio", "command": "x"}).transport == "stdio"
    assert _refused({"mcpServers": {"s": {"type": "ws", "url": "http://h"}}}) == (
        "Config 'c.json' server 's': 'type' must be 'stdio', 'http' or 'sse', got 'ws'.")
    assert _refused({"mcpServers": {"s": {"type": "sse", "command": "x"}}}) == (
        "Config 'c.json' server 's': 'type' 'sse' needs 'url'.")
    assert _refused({"mcpServers": {"s": {"type": "stdio", "url": "http://h"}}}) == (
        "Config 'c.json' server 's': 'type' 'stdio' needs 'command'.")


def test_vs_code_servers_shape_is_read_like_mcp_servers(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({
        "inputs": [],
        "servers": {"git": {"type": "stdio", "command": "mcp-server-git", "args": ["-r", "."]},
                    "remote": {"type": "http", "url": "https://h/mcp"},
                    "legacy": {"type": "sse", "url": "https://h/sse"}}}))
    config = load_config(path)
    assert [(s.name, s.transport) for s in config.servers] == [
        ("git", "stdio"), ("remote", "http"), ("legacy", "sse")]
    assert _refused({"mcpServers": {"a": {"command": "x"}}, "servers": {}}) == (
        "Config 'c.json' has both 'mcpServers' and 'servers'; keep one.")


def test_byref_block_mode_always_load_and_call_tool() -> None:
    base = {"mcpServers": {"s": {"command": "x"}}}
    default = parse_config(base, environ={})
    assert (default.mode, default.always_load, default.call_tool) == ("search", (), "all")
    direct = parse_config({**base, "byref": {"mode": "direct"}}, environ={})
    assert (direct.mode, direct.call_tool) == ("direct", "off")
    pinned = parse_config({**base, "byref": {"alwaysLoad": ["s__read*"], "callTool":
                                             "readOnly"}}, environ={})
    assert (pinned.always_load, pinned.call_tool) == (("s__read*",), "readOnly")
    assert _refused({**base, "byref": {"mode": "lazy"}}) == (
        "Config 'c.json': byref.mode must be 'search' or 'direct', got 'lazy'.")
    assert _refused({**base, "byref": {"callTool": "some"}}) == (
        "Config 'c.json': byref.callTool must be 'all', 'readOnly' or 'off', got 'some'.")
    assert _refused({**base, "byref": {"alwaysLoad": "s__read"}}) == (
        "Config 'c.json': byref.alwaysLoad must be a list of tool names (as search_tools gives "
        "them, globs allowed), got 's__read'.")
    assert _refused({**base, "byref": {"inlineMediaBytes": 0}}) == (
        "Config 'c.json' byref.inlineMediaBytes must be a positive number, got 0.")


def test_share_roots_and_pool_are_read_and_checked() -> None:
    config = parse_config({"mcpServers": {"fs": {
        "command": "x", "share": "tenant",
        "roots": ["file:///srv/a", {"uri": "file:///srv/b", "name": "b"}]}},
        "byref": {"pool": {"idleSeconds": 30, "maxProcesses": 4, "maxPerTenant": 2}}},
        source="c")
    [fs] = config.servers
    assert fs.share == "tenant" and fs.roots == (("file:///srv/a", None), ("file:///srv/b", "b"))
    assert (config.pool_idle, config.pool_max, config.pool_max_per_tenant) == (30, 4, 2)
    for entry, message in (
            ({"share": "user"}, "Config 'c' server 'fs': 'share' must be 'all', 'tenant', "
             "'principal' or 'conversation' (who shares one process of it), got 'user'."),
            ({"roots": ["/srv/a"]}, "Config 'c' server 'fs': 'roots' must be a list of root URIs "
             "(\"file:///path\") or {\"uri\": …, \"name\": …} objects, got ['/srv/a'].")):
        with pytest.raises(ConfigError) as caught:
            parse_config({"mcpServers": {"fs": {"command": "x", **entry}}}, source="c")
        assert str(caught.value) == message
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"fs": {"command": "x"}},
                      "byref": {"pool": {"maxProcesses": 0}}}, source="c")
    assert str(caught.value) == ("Config 'c': byref.pool.maxProcesses must be a whole number of "
                                 "processes, 1 or more, got 0.")


def test_protocol_is_auto_unless_an_entry_keeps_the_handshake() -> None:
    config = parse_config({"mcpServers": {"a": {"url": "http://h/mcp"}, "b": {
        "url": "http://h/mcp", "protocol": "handshake"}}}, source="c")
    assert [s.protocol for s in config.servers] == ["auto", "handshake"]
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"a": {"url": "http://h/mcp", "protocol": "2025-11-25"}}},
                     source="c")
    assert str(caught.value) == (
        "Config 'c' server 'a': 'protocol' must be 'auto' (2026-07-28 where the server speaks it) "
        "or 'handshake' (the initialize generation), got '2025-11-25'.")
