"""The gateway's config file: the `mcpServers` JSON MCP clients already use, plus a `byref` block.

Owns reading and checking that file. The law: a config either loads whole or fails with one error
that names the file, the server and the key (identifiers with `!r`) and says what would fit;
keys other clients add to a server entry (`disabled`, `alwaysAllow`, …) are ignored, while the
`byref` block is strict, since a misspelt gateway setting would otherwise pass silently.

    {"mcpServers": {"git": {"command": "mcp-server-git", "args": ["--repository", "."]},
                    "remote": {"url": "https://host/mcp", "headers": {"X-Key": "…"}}},
     "byref": {"scope": "me", "timeout": 60, "autoInsertBytes": 24576, "workingSet": 8,
               "store": "file://.byref", "usage": "usage.jsonl",
               "tokens": {"<bearer token>": {"tenant": "acme", "principal": "alice"}}}}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from byref.discovery import DEFAULT_BUDGET
from byref.dispatch import AUTO_INSERT_BYTES
from byref.errors import OperatorError

DEFAULT_TIMEOUT = 60.0
"""Seconds one upstream call may take before the model is told it timed out."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BYREF_KEYS = frozenset({"scope", "timeout", "autoInsertBytes", "workingSet", "store", "tokens",
                         "usage"})


class ConfigError(OperatorError, ValueError):
    """The config file cannot be used; the text names where and what would fit."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream: a command to spawn (stdio) or a URL to reach (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"


@dataclass(frozen=True, slots=True)
class Grant:
    """What a bearer token stands for: the tenant and principal its requests run as."""

    tenant: str
    principal: str


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    servers: tuple[ServerConfig, ...]
    scope: str = "local"
    """The stdio scope's tenant (over stdio one process is one scope)."""
    timeout: float = DEFAULT_TIMEOUT
    auto_insert_bytes: int = AUTO_INSERT_BYTES
    working_set: int = DEFAULT_BUDGET
    store: str | None = None
    tokens: dict[str, Grant] = field(default_factory=dict)
    source: str = "<config>"
    usage: Path | None = None
    """The usage log: search → activate evidence is appended to it, and the catalog learns its
    glossary from it whenever the catalog is built (relative to the config file's folder)."""

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(f"No upstream server {name!r}; configured: "
                       f"{', '.join(repr(s.name) for s in self.servers) or 'none'}.")


def load_config(path: str | Path) -> GatewayConfig:
    """Read and check a config file."""
    p = Path(path)
    where = repr(str(p))
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"Config file {where} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Config file {where} cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"Config file {where} is not valid JSON: {exc}") from None
    return parse_config(raw, source=str(p), base=p.parent)


def parse_config(raw: Any, *, source: str = "<config>", base: Path | None = None) -> GatewayConfig:
    """Check a decoded config; relative `cwd` values are taken from `base`."""
    where = repr(source)
    if not isinstance(raw, dict):
        raise ConfigError(f"Config {where} must be a JSON object with 'mcpServers', got "
                          f"{type(raw).__name__!r}.")
    servers_raw = raw.get("mcpServers")
    if not isinstance(servers_raw, dict) or not servers_raw:
        raise ConfigError(f"Config {where} needs 'mcpServers': an object of server name → "
                          "{\"command\": …} or {\"url\": …}, as MCP clients write it.")
    opts = raw.get("byref") or {}
    if not isinstance(opts, dict):
        raise ConfigError(f"Config {where}: 'byref' must be an object, got "
                          f"{type(opts).__name__!r}.")
    unknown = sorted(set(opts) - _BYREF_KEYS)
    if unknown:
        raise ConfigError(f"Config {where}: unknown 'byref' key(s) {', '.join(map(repr, unknown))};"
                          f" accepted: {', '.join(map(repr, sorted(_BYREF_KEYS)))}.")
    timeout = _number(opts.get("timeout", DEFAULT_TIMEOUT), f"{where} byref.timeout")
    servers = tuple(_server(name, entry, where, timeout, base)
                    for name, entry in servers_raw.items())
    scope = opts.get("scope", "local")
    if not isinstance(scope, str) or not scope:
        raise ConfigError(f"Config {where}: byref.scope must be a non-empty string, got {scope!r}.")
    store = opts.get("store")
    if store is not None and not isinstance(store, str):
        raise ConfigError(f"Config {where}: byref.store must be a store URL string, got "
                          f"{store!r}.")
    usage = opts.get("usage")
    if usage is not None and (not isinstance(usage, str) or not usage):
        raise ConfigError(f"Config {where}: byref.usage must be a file path string, got "
                          f"{usage!r}.")
    return GatewayConfig(
        usage=None if usage is None else (base or Path.cwd()) / usage,
        servers=servers, scope=scope, timeout=timeout,
        auto_insert_bytes=int(_number(opts.get("autoInsertBytes", AUTO_INSERT_BYTES),
                                      f"{where} byref.autoInsertBytes")),
        working_set=int(_number(opts.get("workingSet", DEFAULT_BUDGET),
                                f"{where} byref.workingSet")),
        store=store, tokens=_tokens(opts.get("tokens", {}), where), source=source,
    )


def _server(name: Any, entry: Any, where: str, timeout: float, base: Path | None) -> ServerConfig:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"Config {where}: server name {name!r} must be letters, digits, '_', "
                          "'-' or '.', starting with a letter or digit.")
    at = f"{where} server {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"Config {at} must be an object, got {type(entry).__name__!r}.")
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"Config {at} needs exactly one of 'command' (a program to start) or "
                          "'url' (a streamable HTTP endpoint).")
    if command is not None and (not isinstance(command, str) or not command):
        raise ConfigError(f"Config {at}: 'command' must be a non-empty string, got {command!r}.")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://",
                                                                              "https://"))):
        raise ConfigError(f"Config {at}: 'url' must be an http:// or https:// URL, got {url!r}.")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"Config {at}: 'args' must be a list of strings, got {args!r}.")
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise ConfigError(f"Config {at}: 'cwd' must be a string, got {cwd!r}.")
        if base is not None and not Path(cwd).is_absolute():
            cwd = str(base / cwd)
    return ServerConfig(
        name=name, command=command, args=tuple(args), env=_strings(entry.get("env"), at, "env"),
        cwd=cwd, url=url, headers=_strings(entry.get("headers"), at, "headers"),
        timeout=_number(entry.get("timeout", timeout), f"{at} timeout"),
    )


def _strings(value: Any, at: str, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise ConfigError(f"Config {at}: {key!r} must be an object of strings, got {value!r}.")
    return dict(value)


def _number(value: Any, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"Config {at} must be a positive number, got {value!r}.")
    return float(value)


def _tokens(value: Any, where: str) -> dict[str, Grant]:
    if not isinstance(value, dict):
        raise ConfigError(f"Config {where}: byref.tokens must be an object of token → "
                          "{\"tenant\": …, \"principal\": …}.")
    out: dict[str, Grant] = {}
    for i, (token, grant) in enumerate(value.items()):
        # The token itself is a secret: errors name its position, never its text.
        if len(token) < 16:
            raise ConfigError(f"Config {where}: byref.tokens entry #{i + 1} is shorter than 16 "
                              "characters; use a long random token.")
        if not isinstance(grant, dict) or set(grant) != {"tenant", "principal"} or not all(
                isinstance(grant[k], str) and grant[k] for k in ("tenant", "principal")):
            raise ConfigError(f"Config {where}: byref.tokens entry #{i + 1} must be "
                              "{\"tenant\": \"…\", \"principal\": \"…\"}.")
        out[token] = Grant(grant["tenant"], grant["principal"])
    return out
