"""The JWKS's signing keys, fetched off every request's path: one fetch at a time, bounded in
time and size, cached, and refreshed ahead of expiry.

Owns `JwksKeys`. Why not PyJWKClient: its fetch blocks a thread behind a lock, so a hanging JWKS
endpoint parked every worker thread, stalling requests that never needed a key
(docs/NOTES.md#jwks). The law: a request whose key is cached never waits (a refresh due soon
runs in the background, `spawn`); one that needs a fetch waits for the single fetch in flight
at most `timeout` seconds, then is refused; at most one fetch runs at a time, on the event loop;
an unknown key id refetches at most once a `cooldown`; a set older than `lifespan` is not used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

LIFESPAN = 300.0
"""Seconds a fetched key set is used."""
REFRESH_AHEAD = 0.8
"""Fraction of `LIFESPAN` after which a request using the set starts a background refresh."""
MAX_JWKS_BYTES = 1 << 20
"""A key set larger than this is refused (a JWKS holds a few keys)."""

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


class JwksKeys:
    """Key id → signing key (PyJWT's `PyJWK`), from `uri`."""

    def __init__(self, uri: str, *, timeout: float, cooldown: float,
                 lifespan: float = LIFESPAN, spawn: Spawn | None = None) -> None:
        import jwt

        self._jwt = jwt
        self.uri, self.timeout, self.cooldown, self.lifespan = uri, timeout, cooldown, lifespan
        self.spawn = spawn
        """Starts a background refresh (the gateway's task group); None: refreshes are waited
        for by the request that finds them due."""
        self._keys: dict[str | None, Any] = {}
        self._fetched: float | None = None
        self._tried = float("-inf")
        self._flight: anyio.Event | None = None
        self.fetches = 0
        """Fetches started (for tests and the operator)."""
        self.last_error: str | None = None
        """Why the last fetch failed (the operator's; never shown to a client)."""

    async def key(self, kid: str | None) -> Any | None:
        """The key `kid` names, or None: not in the set (after at most one fetch), or the set
        could not be fetched within the timeout."""
        now = time.monotonic()
        age = now - self._fetched if self._fetched is not None else None
        if age is not None and age < self.lifespan:
            if (age >= self.lifespan * REFRESH_AHEAD and self._flight is None
                    and self.spawn is not None):  # refreshed ahead, in the background
                self._flight = anyio.Event()
                try:
                    self.spawn(self._fetch)
                except RuntimeError:  # its task group has ended: renewed when it expires
                    self._flight = None
            found = self._keys.get(kid)
            if found is not None:
                return found
            if now - self._tried < self.cooldown and self._flight is None:
                return None  # an unknown key id refetches at most once a cooldown
        await self._fetched_now()
        fresh = self._fetched is not None and time.monotonic() - self._fetched < self.lifespan
        return self._keys.get(kid) if fresh else None

    async def _fetched_now(self) -> None:
        """Wait (at most `timeout`) for the fetch in flight, starting one if none is."""
        flight = self._flight
        if flight is None:
            flight = self._flight = anyio.Event()
            try:
                if self.spawn is None:
                    raise RuntimeError("no task group to fetch in")
                self.spawn(self._fetch)
            except RuntimeError:  # none, or it has ended: this request fetches for everyone
                with anyio.CancelScope(shield=True):  # its waiters' fetch ends for them all
                    await self._fetch()
                return
        with anyio.move_on_after(self.timeout):
            await flight.wait()

    async def _fetch(self) -> None:
        """One fetch of the set, bounded by `timeout` and `MAX_JWKS_BYTES`; its waiters are
        released whatever happens."""
        import httpx2

        self.fetches += 1
        self._tried = time.monotonic()
        try:
            with anyio.fail_after(self.timeout):
                async with httpx2.AsyncClient(timeout=self.timeout) as http, http.stream(
                        "GET", self.uri, headers={"Accept": "application/json"}) as answer:
                    if answer.status_code != 200:
                        raise ValueError(f"HTTP {answer.status_code}")
                    body = bytearray()
                    async for chunk in answer.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_JWKS_BYTES:
                            raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
            keys = self._parsed(bytes(body))
        except Exception as exc:  # the set stays as it was; the operator is told why
            self.last_error = f"{type(exc).__name__}: {exc}"[:300] if str(exc) else \
                type(exc).__name__
        else:
            self._keys, self._fetched, self.last_error = keys, time.monotonic(), None
        finally:
            flight, self._flight = self._flight, None
            if flight is not None:
                flight.set()

    def _parsed(self, body: bytes) -> dict[str | None, Any]:
        data = json.loads(body)
        found: dict[str | None, Any] = {}
        for key in self._jwt.PyJWKSet.from_dict(data).keys:
            if key.public_key_use in (None, "sig"):
                found[key.key_id] = key
        return found
