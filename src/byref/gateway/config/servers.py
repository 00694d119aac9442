"""One upstream server's entry in the gateway's config file, as MCP clients already write it.

Owns `ServerConfig` and the checks of a `mcpServers` (or VS Code `servers`) entry. The law: keys
other clients add (`alwaysAllow`, …) are ignored, and what users already write is honoured as
their clients read it: `"disabled": true` leaves a server out, `"tools": {"allow": [...],
"deny": [...]}` globs filter its tools, `${VAR}` / `${VAR:-default}` are taken from the
environment in `command`, `args`, `env`, `url` and `headers` (an unset variable with no default
is an error, never a literal `${VAR}` passed on), and `"type": "stdio" | "http" | "sse"` picks
the transport. byref's own keys: `"share"` (who shares one upstream process or session: `"all"`,
`"tenant"`, `"principal"`, `"conversation"`; default `GatewayConfig.share_of`) and `"roots"`
(what the server is told when it asks for roots and no client call can answer: URIs or
`{"uri", "name"}` objects, default none), and `"protocol": "handshake"` (speak to it in the
handshake generation even if it speaks 2026-07-28: for a server whose tools ask their client
mid-call, which a 2026-07-28 connection cannot carry; default `"auto"`, `upstream.era`), and
`"prestart": "connect" | "list" | false` (start the instance a principal would call on when it
connects, or on its first `tools/list`, rather than on its first call; within the pool's caps,
`pooled.Pooled.prestart`; default false).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from byref.gateway.config.values import ConfigError, expand, number, strings

DEFAULT_TIMEOUT = 60.0
"""Seconds one upstream call may take before the model is told it timed out."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SHARES = ("all", "tenant", "principal", "conversation")
TRANSPORTS = ("stdio", "http", "sse")
PROTOCOLS = ("auto", "handshake")
PRESTARTS = ("connect", "list")
Transport = Literal["stdio", "http", "sse", "memory"]
Share = Literal["all", "tenant", "principal", "conversation"]
Protocol = Literal["auto", "handshake"]
Prestart = Literal["connect", "list"]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream: a command to spawn (stdio), a URL to reach (streamable HTTP, legacy SSE) or
    a server in this process (`server`)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    kind: Transport | None = None
    """The transport the entry names (`type`); None: stdio for a command, HTTP for a URL."""
    allow: tuple[str, ...] | None = None
    """Globs of upstream tool names to keep (None: every tool)."""
    deny: tuple[str, ...] = ()
    """Globs of upstream tool names to leave out (applied after `allow`)."""
    share: Share | None = None
    """Who shares one process (stdio) or upstream session (url); None: `GatewayConfig.share_of`."""
    roots: tuple[tuple[str, str | None], ...] = ()
    """(uri, name) the server is told when it asks for roots and no client call can answer."""
    protocol: Protocol = "auto"
    """Which protocol generation it is spoken to in: `auto` (`upstream.era`) or `handshake`."""
    prestart: Prestart | None = None
    """When a principal's instance starts before its first call: at `connect` (its client's
    `initialized` or `server/discover`), at its first `list` of tools, or None (on the call)."""
    server: Any = field(default=None, compare=False, repr=False)
    """An MCP server in this process (the SDK's `Server` or `MCPServer`), reached over the SDK's
    in-memory transport instead of `command` or `url`; set in code (an embedding application,
    the gateway's unit tests), never from a config file."""

    @property
    def transport(self) -> Transport:
        """How the server is reached: the configured `type`, else http when it has a URL, else
        stdio."""
        if self.server is not None:
            return "memory"
        if self.kind is not None:
            return self.kind
        return "http" if self.url is not None else "stdio"

    def keeps(self, tool: str) -> bool:
        """Whether the entry's `tools` filter lets the upstream tool `tool` into the catalog."""
        if self.allow is not None and not any(fnmatch.fnmatchcase(tool, g) for g in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(tool, g) for g in self.deny)


def disabled(name: Any, entry: Any, where: str) -> bool:
    """Whether the entry says `"disabled": true` (it is then left out)."""
    if not isinstance(entry, dict) or "disabled" not in entry:
        return False
    flag = entry["disabled"]
    if not isinstance(flag, bool):
        raise ConfigError(f"Config {where} server {name!r}: 'disabled' must be true or false, "
                          f"got {flag!r}.")
    return flag


def server_entry(name: Any, entry: Any, where: str, timeout: float, base: Path | None,
                 environ: Mapping[str, str]) -> ServerConfig:
    """Check one server entry; `timeout` is the config's default, relative `cwd` is taken from
    `base`, `${VAR}` from `environ`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"Config {where}: server name {name!r} must be letters, digits, '_', "
                          "'-' or '.', starting with a letter or digit.")
    at = f"{where} server {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"Config {at} must be an object, got {type(entry).__name__!r}.")
    kind = entry.get("type")
    if kind is not None and kind not in TRANSPORTS:
        raise ConfigError(f"Config {at}: 'type' must be 'stdio', 'http' or 'sse', got {kind!r}.")
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"Config {at} needs exactly one of 'command' (a program to start) or "
                          "'url' (a streamable HTTP endpoint).")
    if kind is not None and (kind == "stdio") != (command is not None):
        raise ConfigError(f"Config {at}: 'type' {kind!r} needs "
                          f"{'command' if kind == 'stdio' else 'url'!r}.")
    if command is not None and (not isinstance(command, str) or not command):
        raise ConfigError(f"Config {at}: 'command' must be a non-empty string, got {command!r}.")
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"Config {at}: 'url' must be an http:// or https:// URL, got {url!r}.")
    if url is not None:
        url = expand(url, at, "url", environ)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"Config {at}: 'url' must be an http:// or https:// URL, got "
                              f"{url!r}.")
    if command is not None:
        command = expand(command, at, "command", environ)
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"Config {at}: 'args' must be a list of strings, got {args!r}.")
    args = [expand(a, at, f"args[{i}]", environ) for i, a in enumerate(args)]
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise ConfigError(f"Config {at}: 'cwd' must be a string, got {cwd!r}.")
        if base is not None and not Path(cwd).is_absolute():
            cwd = str(base / cwd)
    allow, deny = _filter(entry.get("tools"), at)
    share = entry.get("share")
    if share is not None and share not in SHARES:
        raise ConfigError(f"Config {at}: 'share' must be 'all', 'tenant', 'principal' or "
                          f"'conversation' (who shares one process of it), got {share!r}.")
    protocol = entry.get("protocol", "auto")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"Config {at}: 'protocol' must be 'auto' (2026-07-28 where the server "
                          "speaks it) or 'handshake' (the initialize generation), got "
                          f"{protocol!r}.")
    prestart = entry.get("prestart", False)
    if prestart is not False and prestart not in PRESTARTS:
        raise ConfigError(f"Config {at}: 'prestart' must be 'connect' (start a principal's "
                          "process of it when the principal connects), 'list' (on its first "
                          "tools/list) or false (on its first call, the default), got "
                          f"{prestart!r}.")
    return ServerConfig(
        name=name, command=command, args=tuple(args),
        env=strings(entry.get("env"), at, "env", environ),
        cwd=cwd, url=url, headers=strings(entry.get("headers"), at, "headers", environ),
        timeout=number(entry.get("timeout", timeout), f"{at} timeout"),
        kind=kind, allow=allow, deny=deny, share=share, roots=_roots(entry.get("roots"), at),
        protocol=protocol, prestart=prestart or None,
    )


def _roots(value: Any, at: str) -> tuple[tuple[str, str | None], ...]:
    """A server's `roots`: URIs, or {"uri": …, "name": …} objects."""
    if value is None:
        return ()
    out: list[tuple[str, str | None]] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str) and "://" in item:
                out.append((item, None))
            elif isinstance(item, dict) and set(item) <= {"uri", "name"} and isinstance(
                    item.get("uri"), str) and "://" in item["uri"] and isinstance(
                    item.get("name", ""), str):
                out.append((item["uri"], item.get("name")))
            else:
                break
        else:
            return tuple(out)
    raise ConfigError(f"Config {at}: 'roots' must be a list of root URIs (\"file:///path\") or "
                      f"{{\"uri\": …, \"name\": …}} objects, got {value!r}.")


def _filter(value: Any, at: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    if value is None:
        return None, ()
    if not isinstance(value, dict) or not set(value) <= {"allow", "deny"}:
        raise ConfigError(f"Config {at}: 'tools' must be {{\"allow\": [globs], \"deny\": "
                          f"[globs]}}, got {value!r}.")
    out: list[tuple[str, ...] | None] = []
    for key in ("allow", "deny"):
        globs = value.get(key)
        if globs is not None and (not isinstance(globs, list) or not all(
                isinstance(g, str) and g for g in globs)):
            raise ConfigError(f"Config {at}: 'tools.{key}' must be a list of tool-name globs, "
                              f"got {globs!r}.")
        out.append(None if globs is None else tuple(globs))
    return out[0], out[1] or ()
