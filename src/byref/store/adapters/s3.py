"""The S3-compatible adapter (`s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=…`).

Owns the object layout `<prefix>/<scope key>/<ref>.bin` (payload) and `<ref>.json` (record) over
obstore (the `s3` extra, imported only here). The law: the payload is written
first (one atomic object; streamed puts go up as a multipart upload that is never visible
unfinished) and the record last, and only the record makes an artifact exist, so a crash mid-put
leaves nothing visible. Credentials come from the usual AWS environment variables or the URL's
query; with a custom `endpoint` and no credentials anywhere, requests go unsigned to that endpoint
and nowhere else (never the cloud instance-metadata address, which the URL did not name). Object
storage has no lock: two processes putting into one bounded scope at the same
instant may briefly overshoot its ceilings until the next put in that scope.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import msgspec

from byref.errors import install_hint
from byref.events import Emitter
from byref.store.kit import (
    Meter,
    Stamp,
    damaged,
    evicted,
    new_meta,
    paginate,
    refused,
    verified,
)
from byref.store.port import (
    Artifact,
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactPage,
    PutOptions,
    Scope,
    StoreUnavailableError,
    StoreURLError,
    StreamedArtifact,
    is_key,
    mint_key,
    parse_record,
    sha256_digest,
    verify,
)
from byref.store.retention import Retention, is_expired, plan_evictions, refuse_oversize

PART = 8 << 20


def _obstore() -> Any:
    try:
        import obstore
        import obstore.store
    except ImportError:
        raise StoreUnavailableError(
            f"The S3 store needs obstore; install it with: {install_hint('s3')}"
        ) from None
    return obstore


class S3Store:
    """The `s3://` adapter (via obstore): a JSON record and a payload object per artifact under
    `prefix`."""
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        config: dict[str, str] | None = None,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
        emit: Emitter | None = None,
    ) -> None:
        self._obs = obs = _obstore()
        self.bucket, self.prefix, self.config = bucket, prefix.strip("/"), dict(config or {})
        self.retention = retention or Retention()
        self.clock = clock
        self.emit = emit or Emitter(clock=clock)
        self._stamp = Stamp()
        settings: dict[str, Any] = dict(self.config)
        endpoint = settings.get("endpoint", "")
        # Without credentials obstore would ask 169.254.169.254 (instance metadata) for some:
        # an address the URL never named. A custom endpoint gets unsigned requests instead.
        self.unsigned = bool(endpoint) and not _credentials_given(settings)
        if self.unsigned:
            settings["skip_signature"] = True
        client = {"connect_timeout": "5s", "timeout": "120s",
                  "allow_http": endpoint.startswith("http://")}
        retry = {"max_retries": 2, "retry_timeout": timedelta(seconds=15)}
        try:
            self._store = obs.store.S3Store(
                bucket, prefix=self.prefix or None, client_options=client, retry_config=retry,
                **settings,
            )
        except (obs.exceptions.BaseError, ValueError) as exc:
            raise StoreURLError(
                f"Cannot configure S3 store {self.url!r}: {exc}. Query keys are S3 settings such "
                "as endpoint, region, access_key_id."
            ) from exc
        try:
            obs.list_with_delimiter(self._store, "probe/")
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            unsigned = " (no AWS credentials were found, so it was sent unsigned)" * self.unsigned
            raise StoreUnavailableError(
                f"Cannot reach bucket {bucket!r} at {endpoint or 'AWS'!r}: {first}{unsigned}. "
                "Check that the server is running, the bucket exists and the AWS credentials are "
                "set."
            ) from exc

    @property
    def url(self) -> str:
        """The URL that reopens this store, without secrets."""
        safe = {k: v for k, v in self.config.items() if "secret" not in k and "token" not in k}
        query = f"?{urlencode(safe)}" if safe else ""
        return f"s3://{self.bucket}/{self.prefix}{query}"

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        """Store `data` under a new ref in `scope`, applying retention; returns its metadata."""
        data = bytes(data)
        refuse_oversize(len(data), self.retention)
        ref = mint_key()
        self._obs.put(self._store, self._bin(scope, ref), data, use_multipart=False)
        return self._commit(
            scope, ref, options, len(data), sha256_digest(data) if options.digest else None
        )

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref` in `scope`, or None when it is absent, expired or another
        scope's."""
        return self._live(scope, ref)

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        """The artifact `ref` in `scope` with its bytes verified, or None when absent; raises
        `ArtifactIntegrityError` for damaged bytes."""
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            data = bytes(self._obs.get(self._store, self._bin(scope, ref)).bytes())
        except FileNotFoundError:
            refused(self.emit, scope, ref, "deleted")
            return None
        verify(meta, data)
        return Artifact(meta, data)

    def delete(self, scope: Scope, ref: str) -> bool:
        """Remove `ref` from `scope`; returns whether it was there."""
        if not is_key(ref) or self._read_meta(scope, ref) is None:
            return False
        self._obs.delete(self._store, [self._json(scope, ref), self._bin(scope, ref)])
        return True

    def list(
        self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
        limit: int | None = None,
    ) -> ArtifactPage:
        """One page of `scope`'s live artifacts, newest first, optionally of one `kind`,
        continuing from `cursor`."""
        return paginate(self._sweep(scope), kind, cursor, limit)

    def close(self) -> None:
        """Nothing to release; the store holds no handle of its own."""
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        """A multipart upload of the payload, then the record. A size mismatch aborts the
        upload and writes no record."""
        refuse_oversize(declared_bytes, self.retention)
        meter = Meter(declared_bytes, digest=options.digest)
        ref = mint_key()
        path = self._bin(scope, ref)
        try:
            self._obs.put(self._store, path, meter.feed(chunks), chunk_size=PART,
                          max_concurrency=4)
        except BaseException:
            self._obs.delete(self._store, path)
            raise
        return self._commit(scope, ref, options, meter.count, meter.digest)

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        """The object's body as it arrives, size- and digest-checked as it passes (the last
        chunk is held back until both match)."""
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            body = self._obs.get(self._store, self._bin(scope, ref))
        except FileNotFoundError:
            refused(self.emit, scope, ref, "deleted")
            return None
        chunks: Iterator[bytes] = (bytes(c) for c in body.stream(min_chunk_size=1 << 20))
        return StreamedArtifact(meta, verified(meta, chunks))

    # -- internals -----------------------------------------------------------------------------
    def _commit(
        self, scope: Scope, ref: str, options: PutOptions, nbytes: int, digest: str | None
    ) -> ArtifactMeta:
        meta = new_meta(
            options, nbytes, digest, self._stamp(self.clock()), self.retention, ref=ref)
        live = self._sweep(scope) if self.retention.bounded else []
        gone = plan_evictions(live, nbytes, self.retention)
        for old in gone:
            self._obs.delete(self._store, [self._json(scope, old), self._bin(scope, old)])
        self._obs.put(self._store, self._json(scope, ref), msgspec.json.encode(meta.to_json()),
                      use_multipart=False)
        self.emit("minted", ref=ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return dataclasses.replace(meta, evicted=evicted(self.emit, scope, gone))

    def _bin(self, scope: Scope, ref: str) -> str:
        return f"{scope.key()}/{ref}.bin"

    def _json(self, scope: Scope, ref: str) -> str:
        return f"{scope.key()}/{ref}.json"

    def _read_meta(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        try:
            raw = self._obs.get(self._store, self._json(scope, ref)).bytes()
        except FileNotFoundError:
            return None
        return parse_record(bytes(raw), self._json(scope, ref))

    def _sweep(self, scope: Scope) -> builtins.list[ArtifactMeta]:
        now, live = self.clock(), []
        for entry in self._obs.list(self._store, prefix=f"{scope.key()}/").collect():
            path = str(entry["path"])
            if not path.endswith(".json"):
                continue
            ref = path.rsplit("/", 1)[-1].removesuffix(".json")
            try:
                meta = self._read_meta(scope, ref)
            except ArtifactIntegrityError as exc:  # skipped and reported: the scope keeps working
                damaged(self.emit, scope, ref, exc)
                continue
            if meta is None:
                continue
            if is_expired(meta, now):
                self._expire(scope, meta.ref)
            else:
                live.append(meta)
        return live

    def _live(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        if not is_key(ref):
            refused(self.emit, scope, ref, "malformed-ref")
            return None
        meta = self._read_meta(scope, ref)
        if meta is None:
            refused(self.emit, scope, ref, "absent")
            return None
        if is_expired(meta, self.clock()):
            self._expire(scope, ref)
            refused(self.emit, scope, ref, "expired")
            return None
        return meta

    def _expire(self, scope: Scope, ref: str) -> None:
        self._obs.delete(self._store, [self._json(scope, ref), self._bin(scope, ref)])
        self.emit("expired", ref=ref, scope=str(scope))


_CREDENTIAL_KEYS = ("access_key_id", "secret_access_key", "session_token", "token",
                    "skip_signature", "web_identity_token_file",
                    "container_credentials_relative_uri",
                    "container_credentials_full_uri")


def _credentials_given(settings: dict[str, Any]) -> bool:
    """Whether the URL or the environment names a credential source (or asks for unsigned
    requests itself), in any of the spellings obstore accepts."""
    given = {k.lower().removeprefix("aws_") for k in settings}
    env = {k.lower().removeprefix("aws_") for k, v in os.environ.items()
           if k.startswith("AWS_") and v}
    return any(key in given or key in env for key in _CREDENTIAL_KEYS)
