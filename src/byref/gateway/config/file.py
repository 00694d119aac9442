"""The gateway's config file: the `mcpServers` JSON MCP clients already use, plus a `byref` block.

Owns reading and checking that file: each server entry in `servers`, its tokens and JWT settings
in `auth`, the value checks every section shares in `values`. The law: a config either loads
whole or fails with one error that names the file, the server and the key (identifiers with
`!r`) and says what would fit; the `byref` block is strict, since a misspelt gateway setting
would otherwise pass silently (a server entry is lenient, as other clients read it: `servers`).
VS Code's `"servers"` file is read like `"mcpServers"`; the pool's limits are `byref.pool`.

    {"mcpServers": {"git": {"command": "mcp-server-git", "args": ["--repository", "."]},
                    "remote": {"url": "https://host/mcp", "headers": {"X-Key": "…"}}},
     "byref": {"scope": "me", "timeout": 60, "autoInsertBytes": 24576, "workingSet": 8,
               "store": "file://.byref", "usage": "usage.jsonl",
               "tokens": {"<bearer token>": {"tenant": "acme", "principal": "alice"},
                          "sha256:<hex digest of a token>": {"tenant": "acme", "principal": "bob",
                                                             "servers": ["git"]}},
               "state": "sqlite:///.byref/state.db", "conversation": "session",
               "conversationTtl": 604800,
               "jwt": {"issuer": "https://login.example", "audience": "byref",
                       "jwksUri": "https://login.example/jwks", "tenant": "acme",
                       "jwksTimeout": 5, "sameAs": {"alice@example.com": "alice"}},
               "pool": {"idleSeconds": 600, "maxProcesses": 64, "maxPerTenant": 16},
               "codeRuns": {"maxRuns": 16, "maxPerPrincipal": 4, "warm": 1}}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from byref.defaults import AUTO_INSERT_BYTES
from byref.defaults import WORKING_SET as DEFAULT_BUDGET
from byref.errors import UnknownName
from byref.gateway.config.auth import Grant as Grant
from byref.gateway.config.auth import JwtConfig as JwtConfig
from byref.gateway.config.auth import parse_jwt, parse_tokens
from byref.gateway.config.servers import (
    DEFAULT_TIMEOUT,
    ServerConfig,
    Share,
    disabled,
    server_entry,
)
from byref.gateway.config.values import ConfigError as ConfigError
from byref.gateway.config.values import number

_BYREF_KEYS = frozenset({"scope", "timeout", "autoInsertBytes", "workingSet", "store", "tokens",
                         "usage", "mode", "alwaysLoad", "callTool", "codeMode", "inlineMediaBytes",
                         "search", "vectorCache", "encoder",
                         "state", "conversation", "conversationTtl", "jwt", "replicas", "pool",
                         "codeRuns", "tasks"})
_POOL_KEYS = frozenset({"idleSeconds", "maxProcesses", "maxPerTenant"})
_RUNS_KEYS = frozenset({"maxRuns", "maxPerPrincipal", "warm"})
_TASKS_KEYS = frozenset({"after", "ttlMs", "pollIntervalMs"})
TASKS_AFTER = 5.0
"""Seconds a call of a client that declared the tasks extension may take before it becomes a
task (`byref.tasks.after`)."""
TASKS_TTL_MS = 3_600_000
"""How long a task is kept from its creation (`byref.tasks.ttlMs`)."""
TASKS_POLL_MS = 1_000
"""The poll interval a task suggests (`byref.tasks.pollIntervalMs`)."""
MODES = ("search", "direct")
CALL_TOOL_POLICIES = ("all", "readOnly", "off")
CODE_MODES = ("off", "readOnly", "all")
INLINE_MEDIA_BYTES = 4 * 1024 * 1024
"""Images and audio up to this size reach the client as image/audio content (and are stored, a ref
beside them); larger ones are stored and shown as a marker only. A full-HD PNG screenshot is
typically 0.2–3 MB."""
POOL_IDLE = 600.0
"""Seconds a pooled upstream process (or session) may sit without a call before it is stopped."""
POOL_MAX = 64
"""Pooled upstream processes (and remote sessions) live at once, per gateway."""
POOL_MAX_PER_TENANT = 16
"""Pooled upstream processes (and remote sessions) live at once, per tenant."""
RUNS_MAX = 16
"""run_code programs running at once, per gateway (`byref.codeRuns.maxRuns`)."""
RUNS_MAX_PER_PRINCIPAL = 4
"""run_code programs running at once, per principal (`byref.codeRuns.maxPerPrincipal`)."""
RUNS_WARM = 1
"""Sandboxes kept started ahead for run_code (`byref.codeRuns.warm`; each used by one run, then
replaced), within `maxRuns` sandboxes alive in all."""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The gateway's whole configuration: the upstream servers and every `byref` setting
    (`load_config` reads it)."""

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
    mode: Literal["search", "direct"] = "search"
    """search: the client is declared the scaffolding plus its working set; direct: every
    upstream tool too (for clients such as Claude Code that defer tools themselves)."""
    always_load: tuple[str, ...] = ()
    """Catalog tool names (or globs) declared from the first turn in search mode."""
    call_tool: Literal["all", "readOnly", "off"] = "all"
    """What call_tool may run: every catalog tool, only tools annotated readOnlyHint (a tool that
    may change things must be activated and called by its own name, so a client's per-tool
    permission prompt sees it), or none (call_tool is not declared). Default: 'all' in search
    mode, 'off' in direct mode (every tool is declared there, so call_tool is only a way round)."""
    code_mode: Literal["off", "readOnly", "all"] = "off"
    """Whether clients are offered `run_code` (a sandboxed program that calls catalog tools, only
    what it prints or returns coming back): 'off' (the default: no code runs on this host),
    'readOnly' (code calls only tools annotated readOnlyHint, and byref's readers), or 'all'
    (every catalog tool, unless callTool is 'readOnly': code never calls what call_tool would
    refuse). In search mode it is found by search_tools like a catalog tool."""
    inline_media_bytes: int = INLINE_MEDIA_BYTES
    state: str | None = None
    """Conversation state URL (byref.conversations); default: SQLite beside a file store, else
    memory."""
    conversation: Literal["session", "principal"] = "session"
    """session: each MCP session is its own conversation; principal: one per principal."""
    conversation_ttl: float | None = 7 * 24 * 3600.0
    """Seconds a conversation may sit idle before it expires (None: never)."""
    stdio_conversation: str | None = None
    """Over stdio, the conversation to resume (`--conversation ID`); None: a new one."""
    jwt: JwtConfig | None = None
    """HTTP bearer JWT validation, beside (or instead of) the static tokens."""
    search: Literal["lexical", "hybrid"] = "lexical"
    """search_tools' ranking: lexical, or fused with the packaged sentence model (needs
    byref[embeddings]); hybrid answers lexically until its tool vectors are ready (read from
    the vector cache, else encoded on a thread) and can abstain when no tool fits."""
    vector_cache: str | None = None
    """The hybrid's vector cache directory ('off': none); default $BYREF_VECTOR_CACHE, else the
    user's cache directory."""
    encoder: str | None = None
    """The hybrid's sentence encoder: an installed package's name or a path to an ONNX sentence
    encoder with its tokenizer (`discovery.hybrid.encoder.load_encoder`); None:
    $BYREF_EMBEDDING_MODEL, else the packaged all-MiniLM-L6-v2."""
    replicas: bool = False
    """One of several gateways behind a load balancer sharing `state`: HTTP is stateless (any
    request may land on any replica) and a principal's conversation is written by all of
    them (shared writers)."""
    pool_idle: float = POOL_IDLE
    pool_max: int = POOL_MAX
    pool_max_per_tenant: int = POOL_MAX_PER_TENANT
    runs_max: int = RUNS_MAX
    tasks_after: float = TASKS_AFTER
    tasks_ttl_ms: int = TASKS_TTL_MS
    tasks_poll_ms: int = TASKS_POLL_MS
    runs_max_per_principal: int = RUNS_MAX_PER_PRINCIPAL
    runs_warm: int = RUNS_WARM

    @property
    def principals(self) -> int:
        """How many principals may connect: the static tokens' distinct (tenant, principal)
        pairs, or unbounded (a large number) with JWT validation."""
        if self.jwt is not None:
            return 1 << 30
        return len({(g.tenant, g.principal) for g in self.tokens.values()})

    def share_of(self, server: ServerConfig) -> Share:
        """Who shares `server`'s process or session: its `share`, else one per principal on a
        gateway more than one principal can reach (a server may keep client state: roots, log
        level, sessions), else all (one client: one process, as without a pool)."""
        if server.share is not None:
            return server.share
        return "principal" if self.principals > 1 else "all"

    def server(self, name: str) -> ServerConfig:
        """The upstream named `name`; raises KeyError naming the configured ones."""
        for s in self.servers:
            if s.name == name:
                return s
        raise UnknownName(f"No upstream server {name!r}; configured: "
                       f"{', '.join(repr(s.name) for s in self.servers) or 'none'}.")


def restricts(config: GatewayConfig) -> bool:
    """Whether some caller may see less than another: a restricting static token, or JWTs
    (whose claims may restrict)."""
    return config.jwt is not None or any(
        g.servers is not None or g.tools is not None for g in config.tokens.values())


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
    return parse_config(raw, source=str(p), base=p.resolve().parent)


def parse_config(raw: Any, *, source: str = "<config>", base: Path | None = None,
                 environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Check a decoded config; `${VAR}` is taken from `environ` (default: this process's
    environment). Every relative path in it (a server's `cwd`, `usage`, `vectorCache`, a
    `file://` or `sqlite:///` store or state URL) is taken from `base`, the config file's
    folder (`load_config`), else the working directory."""
    where = repr(source)
    env = os.environ if environ is None else environ
    if not isinstance(raw, dict):
        raise ConfigError(f"Config {where} must be a JSON object with 'mcpServers', got "
                          f"{type(raw).__name__!r}.")
    if "mcpServers" in raw and "servers" in raw:
        raise ConfigError(f"Config {where} has both 'mcpServers' and 'servers'; keep one.")
    # VS Code's mcp.json names the object "servers"; every other client "mcpServers".
    key = "servers" if "servers" in raw else "mcpServers"
    servers_raw = raw.get(key)
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
    timeout = number(opts.get("timeout", DEFAULT_TIMEOUT), f"{where} byref.timeout")
    servers = tuple(server_entry(name, entry, where, timeout, base, env)
                    for name, entry in servers_raw.items()
                    if not disabled(name, entry, where))
    scope = opts.get("scope", "local")
    if not isinstance(scope, str) or not scope:
        raise ConfigError(f"Config {where}: byref.scope must be a non-empty string, got {scope!r}.")
    store = opts.get("store")
    if store is not None and not isinstance(store, str):
        raise ConfigError(f"Config {where}: byref.store must be a store URL string, got "
                          f"{store!r}.")
    store = None if store is None else _beside(store, base)
    usage = opts.get("usage")
    if usage is not None and (not isinstance(usage, str) or not usage):
        raise ConfigError(f"Config {where}: byref.usage must be a file path string, got "
                          f"{usage!r}.")
    mode = opts.get("mode", "search")
    if mode not in MODES:
        raise ConfigError(f"Config {where}: byref.mode must be 'search' or 'direct', got "
                          f"{mode!r}.")
    call_tool = opts.get("callTool", "all" if mode == "search" else "off")
    if call_tool not in CALL_TOOL_POLICIES:
        raise ConfigError(f"Config {where}: byref.callTool must be 'all', 'readOnly' or 'off', "
                          f"got {call_tool!r}.")
    code_mode = opts.get("codeMode", "off")
    if code_mode not in CODE_MODES:
        raise ConfigError(f"Config {where}: byref.codeMode must be 'off', 'readOnly' or 'all', "
                          f"got {code_mode!r}.")
    search = opts.get("search", "lexical")
    if search not in ("lexical", "hybrid"):
        raise ConfigError(f"Config {where}: byref.search must be 'lexical' or 'hybrid', got "
                          f"{search!r}.")
    vector_cache = opts.get("vectorCache")
    if vector_cache is not None and (not isinstance(vector_cache, str) or not vector_cache):
        raise ConfigError(f"Config {where}: byref.vectorCache must be a directory path or "
                          f"'off', got {vector_cache!r}.")
    if vector_cache is not None and vector_cache.strip().lower() != "off":
        vector_cache = str((base or Path.cwd()) / vector_cache)
    encoder = opts.get("encoder")
    if encoder is not None and (not isinstance(encoder, str) or not encoder.strip()):
        raise ConfigError(f"Config {where}: byref.encoder must be a package name or a path to "
                          f"an ONNX sentence encoder, got {encoder!r}.")
    if encoder is not None and (base or Path.cwd()).joinpath(encoder).exists():
        encoder = str((base or Path.cwd()) / encoder)
    always = opts.get("alwaysLoad", [])
    if not isinstance(always, list) or not all(isinstance(a, str) and a for a in always):
        raise ConfigError(f"Config {where}: byref.alwaysLoad must be a list of tool names (as "
                          f"search_tools gives them, globs allowed), got {always!r}.")
    return GatewayConfig(
        mode=mode, call_tool=call_tool, code_mode=code_mode, always_load=tuple(always),
        search=search, vector_cache=vector_cache, encoder=encoder,
        inline_media_bytes=int(number(opts.get("inlineMediaBytes", INLINE_MEDIA_BYTES),
                                       f"{where} byref.inlineMediaBytes")),
        usage=None if usage is None else (base or Path.cwd()) / usage,
        servers=servers, scope=scope, timeout=timeout,
        auto_insert_bytes=int(number(opts.get("autoInsertBytes", AUTO_INSERT_BYTES),
                                      f"{where} byref.autoInsertBytes")),
        working_set=int(number(opts.get("workingSet", DEFAULT_BUDGET),
                                f"{where} byref.workingSet")),
        store=store, tokens=parse_tokens(opts.get("tokens", {}), where), source=source,
        **_conversations(opts, where, base), jwt=parse_jwt(opts.get("jwt"), where),
        **_pool(opts.get("pool"), where), **_runs(opts.get("codeRuns"), where),
        **_tasks(opts.get("tasks"), where),
    )


def _pool(value: Any, where: str) -> dict[str, Any]:
    """byref.pool: idleSeconds, maxProcesses, maxPerTenant."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= _POOL_KEYS:
        raise ConfigError(f"Config {where}: byref.pool must be an object with "
                          f"{', '.join(map(repr, sorted(_POOL_KEYS)))}, got {value!r}.")
    out: dict[str, Any] = {}
    if "idleSeconds" in value:
        out["pool_idle"] = number(value["idleSeconds"], f"{where} byref.pool.idleSeconds")
    for key, field_name in (("maxProcesses", "pool_max"), ("maxPerTenant", "pool_max_per_tenant")):
        if key in value:
            got = value[key]
            if isinstance(got, bool) or not isinstance(got, int) or got < 1:
                raise ConfigError(f"Config {where}: byref.pool.{key} must be a whole number "
                                  f"of processes, 1 or more, got {got!r}.")
            out[field_name] = got
    return out


def _runs(value: Any, where: str) -> dict[str, Any]:
    """byref.codeRuns: maxRuns, maxPerPrincipal, warm."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= _RUNS_KEYS:
        raise ConfigError(f"Config {where}: byref.codeRuns must be an object with "
                          f"{', '.join(map(repr, sorted(_RUNS_KEYS)))}, got {value!r}.")
    out: dict[str, Any] = {}
    for key, field_name in (("maxRuns", "runs_max"),
                            ("maxPerPrincipal", "runs_max_per_principal")):
        if key in value:
            got = value[key]
            if isinstance(got, bool) or not isinstance(got, int) or got < 1:
                raise ConfigError(f"Config {where}: byref.codeRuns.{key} must be a whole number "
                                  f"of programs, 1 or more, got {got!r}.")
            out[field_name] = got
    if "warm" in value:
        got = value["warm"]
        if isinstance(got, bool) or not isinstance(got, int) or got < 0:
            raise ConfigError(f"Config {where}: byref.codeRuns.warm must be a whole number of "
                              f"sandboxes, 0 or more, got {got!r}.")
        out["runs_warm"] = got
    return out


def _tasks(value: Any, where: str) -> dict[str, Any]:
    """byref.tasks: after (seconds), ttlMs, pollIntervalMs."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= _TASKS_KEYS:
        raise ConfigError(f"Config {where}: byref.tasks must be an object with "
                          f"{', '.join(map(repr, sorted(_TASKS_KEYS)))}, got {value!r}.")
    out: dict[str, Any] = {}
    if "after" in value:
        out["tasks_after"] = number(value["after"], f"{where} byref.tasks.after")
    for key, field_name in (("ttlMs", "tasks_ttl_ms"), ("pollIntervalMs", "tasks_poll_ms")):
        if key in value:
            got = value[key]
            if isinstance(got, bool) or not isinstance(got, int) or got < 1:
                raise ConfigError(f"Config {where}: byref.tasks.{key} must be a whole number "
                                  f"of milliseconds, 1 or more, got {got!r}.")
            out[field_name] = got
    return out


def _beside(url: str, base: Path | None) -> str:
    """A `file://DIR` or `sqlite:///PATH` URL with a relative path, made absolute from `base`
    (the config's folder), so a config means the same files from any working directory."""
    if base is None:
        return url
    for scheme in ("file://", "sqlite:///"):
        if url.startswith(scheme):
            path, sep, query = url[len(scheme):].partition("?")
            if path and not path.startswith("/"):
                return f"{scheme}{base.resolve() / path}{sep}{query}"
    return url


def _conversations(opts: dict[str, Any], where: str, base: Path | None) -> dict[str, Any]:
    """byref.state (a state URL), byref.conversation and byref.conversationTtl (seconds, or 0
    for never)."""
    out: dict[str, Any] = {}
    state = opts.get("state")
    if state is not None:
        if not isinstance(state, str) or "://" not in state:
            raise ConfigError(f"Config {where}: byref.state must be a state URL (memory://, "
                              f"sqlite:///state.db, postgresql://…), got {state!r}.")
        out["state"] = _beside(state, base)
    mode = opts.get("conversation", "session")
    if mode not in ("session", "principal"):
        raise ConfigError(f"Config {where}: byref.conversation must be 'session' (each MCP "
                          "session its own conversation) or 'principal' (one shared by a "
                          f"principal's sessions), got {mode!r}.")
    out["conversation"] = mode
    replicas = opts.get("replicas", False)
    if not isinstance(replicas, bool):
        raise ConfigError(f"Config {where}: byref.replicas must be true or false, got "
                          f"{replicas!r}.")
    if replicas and not (isinstance(state, str) and state.startswith(("postgresql:",
                                                                        "postgres:"))):
        raise ConfigError(f"Config {where}: byref.replicas needs byref.state on PostgreSQL "
                          "(postgresql://…), which every replica shares.")
    out["replicas"] = replicas
    if "conversationTtl" in opts:
        ttl = opts["conversationTtl"]
        if isinstance(ttl, bool) or ttl != 0:
            ttl = number(ttl, f"{where} byref.conversationTtl")
        out["conversation_ttl"] = None if ttl == 0 else float(ttl)
    return out
