"""Tool-list changes between replicas, over PostgreSQL LISTEN/NOTIFY.

Owns the channel replicas (`byref.replicas`) tell each other on that a list changed: an
upstream's tool list (`{"replica": <id>, "server": <name>}`) or a conversation's working set
(`{"replica": <id>, "scope": <scope key>}`, after an activation on one replica). Upstream
processes are per replica, so a replica that hears of a server re-lists it from its own process,
and one that hears of a conversation re-reads how far its shared record has grown; either way it
announces a list change to its own clients. What travels is a name, never a listing.

Why PostgreSQL and not Redis pub/sub: replicas already share their conversation state in
PostgreSQL (replicas require it), so NOTIFY needs no further service to run, secure and watch;
its payloads are small and delivered to every listening session, which is all a "re-list this
server" hint needs (a notice missed while disconnected is covered by re-listing every server on
reconnect, and so is an activation: every conversation the replica holds re-reads its record and
announces if its working set changed). The channel is named after the state's table prefix, so
gateways on one database but different tables never hear each other. The listening connection is
named `byref-listen <channel>` (application_name), so an operator can find it.

The law: a replica never acts on its own notices, a notice makes the hearer re-list (never
trust a payload's contents beyond a server name it has configured), and a lost connection is
an operator message and a retry, never a failed request.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, TextIO

import anyio
import anyio.abc

from byref.store.adapters.pg import first_line, import_psycopg

RETRY_AFTER = 2.0
"""Seconds before listening again after the connection dropped."""


class ListChanges:
    """One replica's end of the channel: `announce(server)` tells the others; `run` hears them
    and calls `heard(server)` for each configured server another replica named."""

    def __init__(self, conninfo: str, table: str, servers: Collection[str],
                 heard: Callable[[str], Awaitable[None]], *,
                 heard_scope: Callable[[str], Awaitable[None]] | None = None,
                 held_scopes: Callable[[], Iterable[str]] = lambda: (),
                 errlog: TextIO | None = None) -> None:
        self.conninfo = conninfo
        self.channel = f"{table}_tool_lists"
        self.replica = uuid.uuid4().hex
        self._servers = frozenset(servers)
        self._heard = heard
        self._heard_scope = heard_scope
        self._held_scopes = held_scopes
        self._errlog = errlog if errlog is not None else sys.stderr
        self._sender: Any = None
        self._send_lock = anyio.Lock()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Listen until cancelled; `task_status.started()` once LISTEN is in effect (so a
        gateway serves only after it can hear), reconnecting after a drop."""
        psycopg = import_psycopg(RuntimeError, "byref.replicas")
        started = False
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=10,
                    application_name=f"byref-listen {self.channel}"[:63])
                async with conn:
                    await conn.execute(psycopg.sql.SQL("LISTEN {}").format(
                        psycopg.sql.Identifier(self.channel)))
                    if not started:
                        started = True
                        task_status.started()
                    else:  # notices sent while we were away are lost: re-read every record
                        # held, then re-list every server. Records first: re-listing announces
                        # a change at once, and a client re-listing on that first notice must
                        # already be declared what another replica activated meanwhile.
                        if self._heard_scope is not None:
                            for key in list(self._held_scopes()):
                                await self._heard_scope(key)
                        for server in sorted(self._servers):
                            await self._heard(server)
                    async for notice in conn.notifies():
                        got = self._parse(notice.payload)
                        if got is None:
                            continue
                        kind, name = got
                        if kind == "server":
                            await self._heard(name)
                        elif self._heard_scope is not None:
                            await self._heard_scope(name)
            except psycopg.Error as exc:
                print(f"byref gateway: not hearing other replicas' tool-list changes "
                      f"(channel {self.channel!r}): {first_line(exc)}; retrying in "
                      f"{RETRY_AFTER:g} s", file=self._errlog, flush=True)
                if not started:
                    started = True
                    task_status.started()  # serve anyway: this replica's own lists still work
                await anyio.sleep(RETRY_AFTER)

    def _parse(self, payload: str) -> tuple[str, str] | None:
        """("server", a configured name) or ("scope", a key) from another replica; else None."""
        try:
            got = json.loads(payload)
        except ValueError:
            return None
        if not isinstance(got, dict) or got.get("replica") == self.replica:
            return None
        server, scope = got.get("server"), got.get("scope")
        if isinstance(server, str) and server in self._servers:
            return "server", server
        return ("scope", scope) if isinstance(scope, str) else None

    async def announce(self, server: str) -> None:
        """Tell the other replicas `server`'s tool list changed (a failure is reported)."""
        await self._send({"replica": self.replica, "server": server}, repr(server))

    async def announce_scope(self, key: str) -> None:
        """Tell the other replicas a conversation's working set changed."""
        await self._send({"replica": self.replica, "scope": key}, "a conversation")

    async def _send(self, message: dict[str, str], what: str) -> None:
        psycopg = import_psycopg(RuntimeError, "byref.replicas")
        payload = json.dumps(message)
        async with self._send_lock:
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await psycopg.AsyncConnection.connect(
                        self.conninfo, autocommit=True, connect_timeout=10)
                await self._sender.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))
            except psycopg.Error as exc:
                print(f"byref gateway: other replicas not told that {what} changed its "
                      f"tools: {first_line(exc)}", file=self._errlog, flush=True)

    async def close(self) -> None:
        """Close the connection that sends notifications."""
        if self._sender is not None:
            await self._sender.close()
            self._sender = None
