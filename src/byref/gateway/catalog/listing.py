"""The upstreams' tool lists as last listed, and the toolbox built from them.

Owns listing every upstream (each in its own task, so one slow or hung server delays no other),
the toolbox rebuilt whenever a listing changed, and what a change sets off: the other replicas
told (`ListChanges`), and a client answered without a server told once it arrives (`Settling`).
The law: a request waits for listings in flight at most its grace, and for a server at most once
(a call that waited the full grace for it is not made to wait again; its tools' calls are
refused as starting); a server still starting is indexed when it arrives and announced; one that
failed is listed again after `START_RETRY_AFTER`; a change heard from another replica is not told
back; an owner's own instance that changes its tools changes what that owner sees, and tells
that owner's clients alone (`own_changed`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio
import anyio.abc
import mcp_types as types

from byref.gateway.catalog.listchanges import ListChanges
from byref.gateway.catalog.settling import Settling
from byref.gateway.catalog.toolbox import Toolbox
from byref.gateway.config.file import Grant
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.manager import START_RETRY_AFTER
from byref.gateway.upstream.pool import Key
from byref.gateway.upstream.pooled import UpstreamManager

Build = Callable[[int, dict[str, list[types.Tool]], dict[str, str], Sequence[str], Grant | None],
                 Toolbox]
"""(version, listings, errors, servers still starting, grant) → a toolbox."""


class Listing:
    """The listings and the current toolbox; `start` attaches the running upstreams (at the
    gateway's start), `toolbox` lists what is due and builds."""

    def __init__(self, build: Build, *, rebuilt: Callable[[int], None],
                 announce: Callable[[Toolbox], Awaitable[None]]) -> None:
        self._make = build
        self._rebuilt = rebuilt
        """Told each new toolbox version (sessions over an older one are dropped)."""
        self._announce = announce
        """Tells every scope's clients of a settled change to `box`."""
        self.box: Toolbox | None = None
        self._box_lock = anyio.Lock()
        self._listings: dict[str, list[types.Tool]] = {}
        self._errors: dict[str, str] = {}
        """Why each unavailable server is, as clients are told (no configured value)."""
        self.failures: dict[str, str] = {}
        """Why each server last failed to list, in full: the operator's (`/readyz`, the log)."""
        self._stale: set[str] = set()
        self._pending: dict[str, anyio.Event] = {}
        """Servers being listed now, each in its own task; the event is set when it ends."""
        self._served_early: set[str] = set()
        """Servers still listing when a toolbox was handed out: their arrival is announced."""
        self._waited: set[str] = set()
        """Servers a request already waited the full grace for (not waited for again)."""
        self._dirty = False
        self._version = 0
        self._announced = 0
        """The toolbox version last announced to every scope (an unchanged one is not)."""
        self._settling = Settling(self._reannounce, lambda: bool(self._served_early))
        self._upstreams: UpstreamManager | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._list_changes: ListChanges | None = None
        self._heard: set[str] = set()
        """Servers being re-listed because another replica said so (not told back)."""
        self._own: dict[str, dict[Key, list[types.Tool]]] = {}
        """Per server, the instances of an owner's own whose tools changed from the catalog's
        (`own_changed`): what those owners see instead."""
        self.announce_own: Callable[[str, Key], Awaitable[None]] | None = None
        """Tells the clients that instance (server, key) serves of a change to their list."""

    def start(self, upstreams: UpstreamManager, group: anyio.abc.TaskGroup) -> None:
        """Attach the running upstreams and the task group listings run in."""
        self._upstreams, self._group = upstreams, group

    def replicate(self, list_changes: ListChanges) -> None:
        """Tell other replicas of this replica's list changes over `list_changes`."""
        self._list_changes = list_changes

    def stop(self) -> None:
        """Detach from the stopped upstreams."""
        self._upstreams = self._group = self._list_changes = None

    @property
    def upstreams(self) -> UpstreamManager:
        """The running upstreams (`start`)."""
        assert self._upstreams is not None, "Listing.start was not called"
        return self._upstreams

    async def toolbox(self, wait: float, *, full: bool) -> Toolbox:
        """The current toolbox, after waiting at most `wait` s for listings in flight (`full`:
        the whole grace, so the servers waited for are not waited for again)."""
        box = self.box
        if box is not None and not self._dirty and not self._stale and not self._errors and (
                not self._pending and len(self._listings) == len(self.upstreams.upstreams)):
            return box  # every upstream listed and nothing changed: no lock on the hot path
        self._start_listings()
        # A start costs at most one full wait: once a request waited the grace for a server,
        # it is announced when it arrives and no later request (a call) waits for it again.
        waiting = [done for name, done in self._pending.items() if name not in self._waited]
        if waiting:
            with anyio.move_on_after(wait):
                for done in waiting:
                    await done.wait()
            if full:
                self._waited.update(self._pending)
        async with self._box_lock:
            if self.box is None or self._dirty:
                self._rebuild()
            assert self.box is not None
            self._served_early.update(self._pending)
            return self.box

    def _start_listings(self) -> None:
        due = {name for name in self.upstreams.upstreams if name not in self._listings
               and self._retry_due(name)} | self._stale
        for name in sorted(due - set(self._pending)):
            self._stale.discard(name)
            self._pending[name] = anyio.Event()
            assert self._group is not None
            self._group.start_soon(self._list_one, name)

    async def _list_one(self, name: str) -> None:
        try:
            got: list[types.Tool] | str = await self.upstreams[name].list_tools(
                avoid=tuple(self._own.get(name, ())))
        except UpstreamError as exc:  # reported to clients by its class, to the operator in full
            got, self.failures[name] = exc.public, str(exc)
        except Exception as exc:  # an upstream that cannot list is reported, not fatal
            got = f"Server {name!r} could not be listed ({type(exc).__name__})."
            self.failures[name] = f"{got[:-1]}: {exc}"
        before: list[types.Tool] | str | None = self._listings.get(name, self._errors.get(name))
        heard = name in self._heard
        self._heard.discard(name)
        if isinstance(got, str):
            self._errors[name] = got
            self._listings.pop(name, None)
        else:
            self._errors.pop(name, None)
            self._listings[name] = got
            own = self._own.get(name, {})
            for key in [k for k, tools in own.items() if tools == got]:
                del own[key]  # the catalog caught up: that owner sees it again
        if self._list_changes is not None and before is not None and got != before and not heard:
            assert self._group is not None  # re-indexed here: the other replicas re-list it
            self._group.start_soon(self._list_changes.announce, name)
        if got != before:
            self._dirty = True
        self._pending.pop(name).set()
        self._waited.discard(name)
        early = name in self._served_early
        self._served_early.discard(name)
        if early or self._settling.settling:  # a client was answered without it: tell it
            self._changed()

    def _retry_due(self, name: str) -> bool:
        failed = self.upstreams[name].failed_at
        return failed is None or time.monotonic() - failed >= START_RETRY_AFTER

    def _rebuild(self) -> None:
        self._dirty = False
        self._version += 1
        self.box = self.build()
        self._rebuilt(self._version)

    def build(self, grant: Grant | None = None,
              own: dict[str, list[types.Tool]] | None = None) -> Toolbox:
        """A toolbox of the current listings (for `grant`: only what it may see; `own`: an
        owner's listings in place of the catalog's)."""
        listings = {**self._listings, **own} if own else self._listings
        return self._make(self._version, listings, self._errors,
                          sorted(set(self._pending) - set(listings)), grant)

    async def upstream_changed(self, server: str) -> None:
        """An upstream's tool list changed: re-index it and tell every scope's clients."""
        self._stale.add(server)
        if self._group is not None:  # re-listed now; announced once that settles
            self._start_listings()
            if server in self._pending:
                self._served_early.add(server)
        self._changed()

    async def replica_changed(self, server: str) -> None:
        """Another replica's `server` changed its tools: re-list ours, tell our clients."""
        self._heard.add(server)
        await self.upstream_changed(server)

    async def own_changed(self, server: str, key: Key) -> None:
        """Instance `key` of `server` (an owner's own) said its tools changed: re-listed, what
        its owners see from now on, and they alone are told; then the catalog is listed again
        elsewhere, so a change the server made for everyone reaches everyone."""
        try:
            got = await self.upstreams[server].list_tools_on(key)
        except Exception as exc:  # the owner's next call says what is wrong
            self.failures[server] = f"Server {server!r} could not be re-listed: {exc}"
            return
        if got is None:
            return
        own = self._own.setdefault(server, {})
        before = own.get(key, self._listings.get(server))
        if got == self._listings.get(server):
            own.pop(key, None)
        else:
            own[key] = got
        if got != before:
            async with self._box_lock:
                self._rebuild()  # a new version: the owners' sessions are built anew
                if self._announced == self._version - 1:
                    self._announced = self._version  # nothing new for everyone else
            if self.announce_own is not None:
                await self.announce_own(server, key)
        # The change may be the server's for everyone (a list kept outside the process): the
        # catalog is listed again on an instance that is no owner's own view.
        await self.upstream_changed(server)

    def own_for(self, key: Callable[[str], Key]) -> dict[str, list[types.Tool]]:
        """The listings an owner sees instead of the catalog's, by server (`key`: the key of
        the owner's instance of a server)."""
        return {server: found for server, own in self._own.items()
                if (found := own.get(key(server))) is not None}

    def forget_own(self, server: str, key: Key) -> None:
        """Instance `key` of `server` is gone: its owners see the catalog's listing again (a new
        version: their sessions are built anew)."""
        if self._own.get(server, {}).pop(key, None) is not None:
            self._dirty = True

    def _changed(self) -> None:
        """The catalog changed (a server listed after a client was answered without it, or a
        server said its tools changed): announced once it settles (`Settling`)."""
        if self._group is not None:
            self._settling.changed(self._group)

    async def _reannounce(self) -> None:
        box = await self.toolbox(0, full=False)  # what is ready now; later arrivals announce
        if box.version == self._announced:
            return
        self._announced = box.version
        await self._announce(box)

    def indexed(self) -> dict[str, str]:
        """Each upstream → `listed`, `failed` (reported to clients) or `pending` (readiness)."""
        return {name: "listed" if name in self._listings else "failed" if name in self._errors
                else "pending" for name in self.upstreams.upstreams}
