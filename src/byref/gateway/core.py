"""The gateway itself: one catalog over every upstream, and each call through byref's dispatch.

Owns the gateway's life (upstreams started lazily, their tool lists kept by `catalog.listing`,
the toolbox built from them by `catalog.build` with the scaffolding every client sees:
search_tools, activate_tool, call_tool, read_result, present; read_json and query_json sit behind
search, declared once a stored result touches them) and one call's walk, downward: the scope's
toolbox, its `Session.run_call` (records the call, dispatches it — a proxied call is awaited on
the loop, no thread hop unless refs must be read or a result placed — and records the result),
then what the call leaves in the conversation (`ScopeState.settle`: a changed working set
announced, usage logged, the record written); replicas and metrics are told last.

The law: what a handshake-era client is declared is a projection of its scope's transcript
(scaffolding plus the working set), rebuilt from the toolbox whenever an upstream's list changes;
a 2026-07-28 client is declared the scaffolding and pinned tools only (`Toolbox.stable`), so its
list changes with the upstreams' and its grant, never with its requests; the upstream
catalog is read lazily (the first request that needs it starts the servers; a `prestart` server
also starts a principal's own instance when it connects or lists, `prestart`), a client's list
never waits long for a server still starting (`list_wait`) and what arrives later is announced
once per settled change (`catalog.settling`); a result's `seq` in the transcript is the one its
refs were rendered with (local tools run and are recorded under the scope's lock; proxied results
and run_code's carry no recipes, so they are recorded when they arrive and a slow upstream or a
long program never holds up other calls, `Toolbox.records_alone`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from typing import Any, Literal, TextIO

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server.connection import Connection

from byref.conversations import ConversationState
from byref.conversations.postgres import PostgresConversations
from byref.discovery.declaring.declare import declare
from byref.discovery.declaring.usage import UsageLog
from byref.discovery.declaring.workingset import ACTIVATE, working_set
from byref.dispatch import Call, Policy
from byref.dispatch.hooks import Hooks
from byref.dispatch.nested import InnerDone, InnerOutcome
from byref.errors import MissingExtra, MisuseError
from byref.events import Emitter
from byref.gateway.access.bearer import permits_server
from byref.gateway.access.scopes import Scopes
from byref.gateway.access.state import ScopeState
from byref.gateway.access.threads import Threads
from byref.gateway.catalog.build import build_toolbox, hybrid_ranker, refuse_call_tool
from byref.gateway.catalog.code import code_runner
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.listchanges import ListChanges
from byref.gateway.catalog.listing import Listing
from byref.gateway.catalog.metadata import GATEWAY_EXPLICIT_READ_BYTES
from byref.gateway.catalog.toolbox import Toolbox
from byref.gateway.config.file import GatewayConfig, Grant
from byref.gateway.ops.health import check_store
from byref.gateway.ops.metrics import GatewayMetrics, MetricsSink
from byref.gateway.upstream.instance.manager import LIST_READY
from byref.gateway.upstream.pool import Key
from byref.gateway.upstream.pooled import UpstreamManager
from byref.harness.options import Hosting
from byref.harness.session import Session
from byref.store import ArtifactStore, open_store
from byref.transcript import Part

RESULT_TRIES = 20
"""Times a local call runs again when another replica wrote between its call and its result."""
LIST_GRACE = 8.0
"""Seconds a call (search_tools, a proxied call) waits for upstreams still starting; later ones
are indexed on arrival and announced."""
LIST_RESUMED = 3.0
"""Seconds a tools/list of a conversation resumed with tools activated waits for their servers
(a client that lists once, as the Inspector CLI does per run, sees them; under Claude Code's
~5 s)."""
PLACED_PREVIEW_CHARS = 1_000
"""Preview characters in a placed result's substitute (the whole substitute stays < 2,000)."""

class Gateway:
    """Use as `async with Gateway(config) as gateway:`; `build_server(gateway)` serves it."""

    list_grace: float = LIST_GRACE

    def __init__(self, config: GatewayConfig, *, store: ArtifactStore | None = None,
                 emit: Emitter | None = None, errlog: TextIO | None = None,
                 policy: Policy | None = None, state: ConversationState | None = None) -> None:
        self.config = config
        self.emit = emit or Emitter()
        self.metrics = _metrics(self)
        """Prometheus metrics (None without prometheus-client); read from the events too."""
        if self.metrics is not None:
            self.emit = Emitter(MetricsSink(self.metrics, self.emit.sink), clock=self.emit.clock)
        self.store = store if store is not None else open_store(config.store or "memory://",
                                                                emit=self.emit)
        self.policy = policy or Policy(auto_insert_bytes=config.auto_insert_bytes,
                                       placed_preview_chars=PLACED_PREVIEW_CHARS)
        self.scopes = Scopes(config, state=state)
        self.threads = Threads(config)
        self.code_runner = code_runner(config)
        """run_code's sandboxes, warm ones included (`catalog.code`; None when codeMode is off)."""
        """Worker threads by owner: run_code's own, a lane per principal (`access.threads`)."""
        self._granted: dict[Grant, Toolbox] = {}
        self._owned: dict[tuple[Grant | None, tuple[tuple[str, Key], ...]], Toolbox] = {}
        """Toolboxes of owners whose own instances list other tools (`Listing.own_for`)."""
        """Per restricting grant, its toolbox (rebuilt when the toolbox's version moves on)."""
        self.usage = UsageLog(config.usage) if config.usage is not None else None
        self.ranker = hybrid_ranker(config)
        self.passed = Passed(config.inline_media_bytes)
        """Upstream images, links and structuredContent on their way to the client's answer."""
        self._errlog = errlog
        self._listing = Listing(self._make_toolbox, rebuilt=self._rebuilt,
                                announce=self._announce)
        """The upstreams' tool lists and the toolbox built from them."""
        self._stack: AsyncExitStack | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._upstreams: UpstreamManager | None = None
        self._list_changes: ListChanges | None = None
        """Replicas: the PostgreSQL channel other replicas' tool-list changes arrive on."""
        # One automatic-insertion dial: reads see the value placement uses. An explicit read
        # (read_result is marked so) is bounded by the explicit-read limit instead.
        self._read_limits = self.policy.read_limits(
            explicit_read_bytes=GATEWAY_EXPLICIT_READ_BYTES)

    # -- lifecycle -----------------------------------------------------------------------------
    async def __aenter__(self) -> Gateway:
        # The store is checked before anything is served: a first result must not be what finds
        # it unwritable.
        await anyio.to_thread.run_sync(check_store, self.store, self.config)
        stack = AsyncExitStack()
        await stack.__aenter__()
        self._group = await stack.enter_async_context(anyio.create_task_group())
        self._upstreams = UpstreamManager(self.config, self._group,
                                          on_change=self._listing.upstream_changed,
                                          errlog=self._errlog)
        self._listing.start(self._upstreams, self._group)
        self._listing.announce_own = self._announce_own
        for pooled in self._upstreams.upstreams.values():
            pooled.on_own_change = self._listing.own_changed
            pooled.on_own_gone = self._listing.forget_own
        if self._upstreams.pooled:  # instances per tenant, principal or conversation: swept
            await self._group.start(self._upstreams.pool.run)
        self._stack = stack
        if self.config.replicas:
            state = self.scopes.conversations
            if isinstance(state, PostgresConversations):
                self._list_changes = ListChanges(
                    state.conninfo, state.table, [s.name for s in self.config.servers],
                    self._listing.replica_changed, heard_scope=self._replica_scope_changed,
                    held_scopes=lambda: [s.scope.key() for s in self.scopes.all()],
                    errlog=self._errlog)
                self._listing.replicate(self._list_changes)
                stack.push_async_callback(self._list_changes.close)
                await self._group.start(self._list_changes.run)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._upstreams is not None:
            await self._upstreams.close()
        if self._group is not None:
            self._group.cancel_scope.cancel()
        if self._stack is not None:
            await self._stack.__aexit__(None, None, None)
        self._stack = self._group = self._upstreams = None
        self._listing.stop()
        if self.code_runner is not None:
            self.code_runner.close()  # the warm sandboxes no run took
        self.scopes.close()  # saves every conversation and releases its memory

    def start_soon(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `fn` in the gateway's task group (work no request waits for: a JWKS refresh)."""
        if self._group is None:
            raise MisuseError("The gateway is not running: use it as `async with Gateway(...)`.")
        self._group.start_soon(fn)

    @property
    def upstreams(self) -> UpstreamManager:
        """The running upstream connections; raises RuntimeError outside `async with
        Gateway(...)`."""
        if self._upstreams is None:
            raise MisuseError("The gateway is not running; use `async with Gateway(config)`.")
        return self._upstreams

    # -- the toolbox ---------------------------------------------------------------------------
    async def toolbox(self, wait: float | None = None) -> Toolbox:
        """The current toolbox; lists upstreams the first time, after a change, or to retry.

        Each upstream is listed in its own task, so one slow or hung server delays no other.
        This waits for listings in flight at most `wait` seconds (default `list_grace`); a
        server still starting then is indexed when it arrives and announced to every scope by a
        list change (`Listing`), and once a call waited the full grace for it, it is not waited
        for again (its tools' calls are refused as starting).
        """
        return await self._listing.toolbox(self.list_grace if wait is None else wait,
                                           full=wait is None)

    @property
    def failures(self) -> dict[str, str]:
        """Why each server last failed to list, in full: the operator's (`/readyz`, the log)."""
        return self._listing.failures

    def _make_toolbox(self, version: int, listings: dict[str, list[types.Tool]],
                      errors: dict[str, str], starting: Sequence[str],
                      grant: Grant | None) -> Toolbox:
        return build_toolbox(
            self.config, version, listings, errors, starting, invoke=self._invoke,
            passed=self.passed, usage=self.usage, emit=self.emit, errlog=self._errlog,
            read_limits=self._read_limits, grant=grant, ranker=self.ranker,
            runner=self.code_runner,
            call_tool=lambda name, arguments=None: self._call_tool_refusal(name, grant))

    def _rebuilt(self, version: int) -> None:
        for state in self.scopes.all():  # an idle scope's dispatcher must not pin the old box
            if state.call_session is not None and state.call_session[0] != version:
                state.call_session = None
            if state.stable_session is not None and state.stable_session[0] != version:
                state.stable_session = None

    def _call_tool_refusal(self, name: str, grant: Grant | None) -> Any:
        # Reached only when the gateway could not unwrap the call (see `Toolbox.unwrap`); said
        # of the catalog the caller's grant sees, not the whole one.
        refuse_call_tool(self._listing.box if grant is None else self._granted.get(grant), name)

    async def _replica_scope_changed(self, key: str) -> None:
        """Another replica changed a shared conversation's working set (or this one may have
        missed that it did, while not listening): if this replica holds it, re-read how far its
        record has grown and, if its working set changed, tell its clients here."""
        for state in self.scopes.all():
            if state.scope.key() != key:
                continue
            lines = getattr(state.transcript, "lines", None)
            async with state.lock:  # no local call's lines waiting while the record is re-read
                if lines is not None and not lines.pending:
                    try:
                        await anyio.to_thread.run_sync(lines.refresh)
                    except Exception as exc:  # expired or unreachable: the next call says so
                        if self._errlog is not None:
                            print(f"byref gateway: conversation {key!r} not re-read after "
                                  f"another replica's activation: {exc}", file=self._errlog)
            await state.declare(self.working_set(state, await self.toolbox_for(state)))

    async def _announce(self, box: Toolbox) -> None:
        for state in self.scopes.all():
            state.declared = tuple(self.working_set(state, box))
            await state.announce()

    async def _invoke(self, server: str, tool: str,
                      arguments: dict[str, Any]) -> types.CallToolResult:
        return await self.upstreams[server].call(tool, arguments)

    def indexed(self) -> dict[str, str]:
        """Each upstream → `listed`, `failed` (reported to clients) or `pending` (readiness)."""
        return self._listing.indexed()

    @property
    def prestarts(self) -> bool:
        """Whether any server starts a principal's instance before its first call."""
        return any(s.prestart is not None for s in self.config.servers)

    def prestart(self, state: ScopeState, when: Literal["connect", "list"]) -> None:
        """Begin starting, without waiting, the instances `state`'s owner would call on, of
        the servers its grant sees that prestart at `when` (a `connect` one also on a list, for
        a client that never connected first); each within the pool's caps (`Pooled.prestart`).
        A failed start is said to whoever calls next, as any start's is."""
        group, upstreams = self._group, self._upstreams
        if group is None or upstreams is None:
            return
        for server in self.config.servers:
            if server.prestart is None or (when == "connect" and server.prestart != "connect"):
                continue
            if not permits_server(state.grant, server.name):
                continue
            pooled = upstreams[server.name]
            serving = pooled.instances.get(pooled.key_of(state.scope))
            if serving is None or not serving.alive:
                group.start_soon(pooled.prestart, state.scope)

    # -- serving -------------------------------------------------------------------------------
    async def toolbox_for(self, state: ScopeState, wait: float | None = None, *,
                          stable: bool = False) -> Toolbox:
        """The toolbox `state`'s grant sees: every tool, or only its servers' and tools' (a
        catalog of its own, so search, activation and calls cannot reach the others); `wait` as
        `toolbox`'s; `stable`: its face for a client whose list never changes with its requests
        (`Toolbox.stable`)."""
        box = await self.toolbox(wait)
        own = self._listing.own_for(self._instance_key(state))
        if own:  # an instance of this owner's own lists other tools than the catalog's
            mine = (state.grant, tuple((s, self.upstreams[s].key_of(state.scope)) for s in own))
            found = self._owned.get(mine)
            if found is None or found.version != box.version:
                found = self._owned[mine] = self._listing.build(state.grant, own)
            box = found
        elif state.grant is not None:
            found = self._granted.get(state.grant)
            if found is None or found.version != box.version:
                found = self._granted[state.grant] = self._listing.build(state.grant)
            box = found
        return box.stable if stable else box

    def _instance_key(self, state: ScopeState) -> Callable[[str], Key]:
        return lambda server: self.upstreams[server].key_of(state.scope)

    async def _announce_own(self, server: str, key: Key) -> None:
        """Tell the scopes instance `key` of `server` serves that their tools changed."""
        for state in self.scopes.all():
            if self.upstreams[server].key_of(state.scope) == key:
                state.declared = tuple(self.working_set(state, await self.toolbox_for(state)))
                await state.announce()

    def list_wait(self, state: ScopeState | None = None, *, stable: bool = False) -> float:
        """Seconds a tools/list waits for servers still starting: none when it declares only the
        scaffolding (search mode), `LIST_READY` when it declares upstream tools (direct mode,
        alwaysLoad), `LIST_RESUMED` for a handshake-era conversation resumed with tools
        activated; the rest are announced as they arrive. Claude Code gives up on a tools/list
        after ~5 s and then shows no tool of the gateway at all."""
        if self.config.mode == "direct" or self.config.always_load:
            return min(self.list_grace, LIST_READY)
        if state is not None and state.declared and not stable:
            return min(self.list_grace, LIST_RESUMED)
        return 0.0

    async def declarations(self, state: ScopeState, *, stable: bool = False
                           ) -> list[dict[str, Any]]:
        """What this scope's client is declared now: scaffolding plus its working set, or,
        `stable` (a 2026-07-28 client), the stable face's scaffolding and pinned tools alone.

        Servers still starting are waited for at most `list_wait` (see `toolbox`)."""
        box = await self.toolbox_for(state, self.list_wait(state, stable=stable), stable=stable)
        return declare(box.catalog, (*box.scaffolding, *box.pinned), state.transcript,
                       budget=0 if stable else self.config.working_set).declarations

    def working_set(self, state: ScopeState, box: Toolbox) -> list[str]:
        """The catalog tool names to declare to this scope's clients: most recently touched first,
        at most the configured budget (the scaffolding and pinned tools are declared anyway and
        take no slot)."""
        return working_set(state.transcript, box.catalog, budget=self.config.working_set,
                           always=box.always)

    async def call(self, state: ScopeState, name: str, arguments: Any, *,
                   connection: Connection | None = None, stable: bool = False) -> Part:
        """Run one client call in `state`'s scope and return the recorded result part
        (`stable`: a 2026-07-28 client's, through the toolbox's stable face)."""
        started = time.perf_counter()
        box = await self.toolbox_for(state, stable=stable)
        call = Call(f"call_{os.urandom(6).hex()}", name, arguments)  # uuid4's cost: ~1.7 us
        target = box.unwrap(call)
        # The session records the call and its result (byref's own tools exclusively: their
        # recipes name the call's seq; retried only when replicas write the record too).
        part = await self._session(state, box).run_call(
            call, run=target, exclusive=box.records_alone(target.name), tries=RESULT_TRIES)
        # One projection per call, compared with what this scope's clients were last told: a
        # working set is declared to handshake-era clients only (a 2026-07-28 list stays put).
        activated = target.name == ACTIVATE and not part.is_error
        changed = await state.settle(self.working_set(state, box), connection=connection,
                                     usage=self.usage if activated else None)
        if changed and self._list_changes is not None and self._group is not None:
            # After the write: a replica told re-reads the record and finds the activation.
            self._group.start_soon(self._list_changes.announce_scope, state.scope.key())
        if self.metrics is not None:
            self.metrics.call(*box.labels(target.name), "error" if part.is_error else "ok",
                              time.perf_counter() - started)
        return part

    def _session(self, state: ScopeState, box: Toolbox) -> Session:
        """The scope's `Session` over this toolbox version: the gateway's tools as given (its
        readers are in the catalog), the scope's transcript and lock."""
        cached = state.stable_session if box.stable_lists else state.call_session
        if cached is None or cached[0] != box.version:
            owner = state.scope
            hooks = Hooks(unknown_tool=lambda name: box.still_starting(name),
                          search=box.search,  # code mode's tools.search: the catalog's
                          threads=self.threads.of((owner.tenant, owner.principal),
                                                  len(box.catalog)),
                          # the calls code makes count as the client's do
                          inner_done=(_inner_metrics(self.metrics, box)
                                      if self.metrics is not None else None))
            session = Session(box.tools, store=self.store, scope=state.store_scope,
                              policy=self.policy, transcript=state.transcript, emit=self.emit,
                              hosting=Hosting(readers=(), lock=state.lock, hooks=hooks))
            cached = (box.version, session)
            if box.stable_lists:
                state.stable_session = cached
            else:
                state.call_session = cached
        return cached[1]


def _inner_metrics(metrics: GatewayMetrics, box: Toolbox) -> InnerDone:
    def done(name: str, outcome: InnerOutcome, seconds: float) -> None:
        metrics.call(*box.labels(name), outcome, seconds, via="code")
    return done


def _metrics(gateway: Gateway) -> GatewayMetrics | None:
    try:
        return GatewayMetrics(conversations=lambda: len(gateway.scopes.all()),
                              pool=lambda: gateway._upstreams.pool if gateway._upstreams else None)
    except MissingExtra:  # prometheus-client is not installed: no metrics, nothing else lost
        return None
