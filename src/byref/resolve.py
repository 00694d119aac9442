"""The one recursive resolver: a ref plus a scope becomes a value, or a stream of bytes.

The law: recipes are evaluated lazily, at the moment of use, from the source they name; a stale
recipe raises ("Derived JSON path '/items' no longer exists in …"), never yields an empty or
partial value. Two caps bound the work: `validation` (how deeply refs may nest in parsed input)
and the tighter `resolution` (how many hops one resolution may take, counting refs recovered from
the transcript). Every failure is a `ResolveError` whose text the model can act on.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from byref.events import Emitter
from byref.jsonview import (
    ChunkReader,
    NotJsonError,
    StaleSelectionError,
    decode,
    literal_value,
    query_stream,
    query_value,
    resolve_pointer,
    stream_pointer,
)
from byref.jsonview.codec import LITERAL_MAX
from byref.media import base, is_json, is_plain_text
from byref.refs import Blob, JsonPointer, JsonQuery, MessageRef, Ref, RefRefusal, handle, quote
from byref.store import ArtifactMeta, ArtifactStore, Scope
from byref.store.port import ArtifactError, ArtifactIntegrityError, CanGetStream
from byref.transcript import Transcript, TranscriptLookupError, walk


@dataclass(frozen=True, slots=True)
class Caps:
    """Defaults: refs may nest 8 deep in input; one resolution may take at most 6 hops."""

    validation: int = 8
    resolution: int = 6


class ResolveError(RefRefusal):
    """A ref could not be turned into a value; the text is shown to the model."""


@dataclass(frozen=True, slots=True)
class BytesSource:
    """Stored bytes behind a ref, reopenable (a recipe may need to read them twice)."""

    store: ArtifactStore
    scope: Scope
    meta: ArtifactMeta

    def open(self) -> IO[bytes]:
        """A reader over the bytes; a stream verifies its recorded digest as it is read, and a
        mismatch surfaces (as a `ResolveError`) before the last chunk, never as wrong bytes."""
        with _store_errors(self.where):
            if isinstance(self.store, CanGetStream):
                streamed = self.store.get_stream(self.scope, self.meta.ref)
                if streamed is not None:
                    return ChunkReader(_guarded(streamed.chunks, self.where))  # type: ignore[return-value]
            artifact = self.store.get(self.scope, self.meta.ref)
        if artifact is None:
            raise ResolveError(_gone(self.meta.ref))
        return io.BytesIO(artifact.data)

    def chunks(self) -> Iterator[bytes]:
        """The payload in 64 KiB chunks, read from a fresh reader."""
        reader = self.open()
        while chunk := reader.read(1 << 16):
            yield chunk

    @property
    def where(self) -> str:
        """The artifact this source reads, for messages."""
        return f"artifact {self.meta.ref!r}"


class Resolver:
    """Resolves refs against one transcript and one store scope."""

    def __init__(
        self,
        transcript: Transcript,
        store: ArtifactStore | None,
        scope: Scope,
        *,
        caps: Caps | None = None,
        emit: Emitter | None = None,
    ) -> None:
        self.transcript = transcript
        self.store = store
        self.scope = scope
        self.caps = caps or Caps()
        self.emit = emit or Emitter()

    # -- public --------------------------------------------------------------------------------
    def value(self, ref: Ref, *, current_seq: int | None = None) -> Any:
        """The JSON value (or text, or bytes) a ref stands for, evaluated now."""
        result = self._value(ref, current_seq, hops=0)
        key = ref.key if isinstance(ref, Blob) else None
        self.emit("resolved", ref_type=type(ref).__name__, ref=key, scope=str(self.scope))
        return result

    def iterate(self, recipe: JsonQuery, *, current_seq: int | None = None) -> Iterator[Any]:
        """The items a query selects, one at a time (streamed when its source is stored bytes)."""
        src = self._source(recipe.source, current_seq, hops=1)
        if not isinstance(src, BytesSource):
            yield from self._apply(recipe, src)
            return
        _require_json(src)
        started = False
        try:
            for item in query_stream(src.open, recipe.path, recipe.filter, where=src.where):
                started = True
                yield item
        except NotJsonError as exc:
            fallback = None if started else self._literal(src)
            if fallback is None:
                raise ResolveError(str(exc)) from exc
            yield from self._apply(recipe, fallback)
        except StaleSelectionError as exc:
            raise ResolveError(str(exc)) from exc
        self.emit("resolved", ref_type="JsonQuery", ref=src.meta.ref, scope=str(self.scope))

    def source(self, ref: Ref, *, current_seq: int | None = None) -> BytesSource | Any:
        """Stored bytes behind `ref` when there are any (streamable), else its value."""
        return self._source(ref, current_seq, hops=0)

    # -- internals -----------------------------------------------------------------------------
    def _hop(self, hops: int) -> int:
        if hops + 1 > self.caps.resolution:
            raise ResolveError(
                f"The reference chain takes more than {self.caps.resolution} steps to resolve. "
                "Refer to the value more directly (for example to the result that holds it)."
            )
        return hops + 1

    def _value(self, ref: Ref, current: int | None, hops: int) -> Any:
        src = self._source(ref, current, hops)
        if isinstance(src, BytesSource):
            return self._materialize(src)
        return src

    def _source(self, ref: Ref, current: int | None, hops: int) -> BytesSource | Any:
        hops = self._hop(hops)
        if isinstance(ref, MessageRef):
            return self._message(ref, current, hops)
        if isinstance(ref, Blob):
            if ref.key is not None:
                if self.store is None:
                    raise ResolveError(
                        f"Artifact {ref.key!r} cannot be read: no artifact store is attached."
                    )
                with _store_errors(f"artifact {ref.key!r}"):
                    meta = self.store.head(self.scope, ref.key)
                if meta is None:
                    raise ResolveError(_gone(ref.key))
                return BytesSource(self.store, self.scope, meta)
            assert ref.source is not None
            inner = self._source(ref.source, current, hops)
            # Blob(source=…) over a plain value: that value is what its bytes decode to.
            return inner
        if isinstance(ref, JsonPointer | JsonQuery):
            return self._recipe(ref, current, hops)
        raise ResolveError(f"Cannot resolve {type(ref).__name__!r}.")  # pragma: no cover

    def _message(self, ref: MessageRef, current: int | None, hops: int) -> BytesSource | Any:
        """The value a Message ref addresses: whatever the model was shown a preview of.

        A field that stands for another value (a recipe, a placed result's or an opaque
        marker's `value`, recorded as `derived`) is that value, and so is anything below it; a
        value that contains such fields has each replaced by the value it stands for, so a ref
        to a whole `read_json` result never delivers the `{"derived": true}` placeholder.
        """
        if ref.seq is None:
            if current is None:
                current = self.transcript.last_seq
            if current is None:
                if ref.handle is not None:
                    raise ResolveError(handle_absent(ref.handle))
                raise ResolveError("The transcript is empty; there is no current message.")
            ref = ref.at(current)
        seq = ref.seq
        assert seq is not None
        try:
            part = self.transcript.part(seq, ref.part)
        except TranscriptLookupError as exc:
            if ref.handle is None:
                raise
            raise ResolveError(handle_absent(ref.handle)) from exc
        # A handle's miss names the handle the model wrote, not a seq it never saw.
        where = (f"message {seq} part {ref.part}" if ref.tail is None
                 else f"result {handle(seq, ref.part)!r}")
        path = ref.field or ""
        derived = part.derived
        # The deepest recorded stand-in at or above the path wins ("" stands for the whole part).
        for key in sorted(derived, key=len, reverse=True):
            if path == key or (key and path.startswith(key + ".")):
                inner = self._source(derived[key], current, hops)
                rest = path[len(key) + 1 :] if key else path
                if not rest or path == key:
                    return inner
                if isinstance(inner, BytesSource):
                    inner = self._materialize(inner)
                return walk(inner, rest, where=f"{where} field {key!r}")
        value = walk(part.value, path, where=where)
        below = {k[len(path) + 1 :] if path else k: r for k, r in derived.items()
                 if k and (not path or k.startswith(path + "."))}
        for rel in sorted(below, key=len):
            stand_in = self._value(below[rel], current, hops)
            value = _replace_at(value, rel.split("."), stand_in)
        return value

    def _recipe(self, ref: JsonPointer | JsonQuery, current: int | None, hops: int) -> Any:
        return self._apply(ref, self._source(ref.source, current, hops))

    def _apply(self, ref: JsonPointer | JsonQuery, src: BytesSource | Any) -> Any:
        """Evaluate a recipe over its already-resolved source: streamed when it is stored bytes."""
        try:
            if isinstance(src, BytesSource):
                _require_json(src)
                try:
                    if isinstance(ref, JsonPointer):
                        return stream_pointer(src.open, ref.path, where=src.where)
                    return list(query_stream(src.open, ref.path, ref.filter, where=src.where))
                except NotJsonError:
                    fallback = self._literal(src)
                    if fallback is None:
                        raise
                    src = fallback
            if isinstance(src, bytes | str):
                # Text is kept as text; JSON in it is parsed here, on demand, for the recipe.
                try:
                    src = decode(src)
                except Exception as exc:
                    rows = literal_value(src) if isinstance(src, str) else None
                    if rows is not None:
                        return self._apply(ref, rows)
                    if isinstance(ref, JsonPointer) and not ref.path and isinstance(src, str):
                        return src  # the whole of a plain text is that text
                    raise ResolveError(
                        f"The referenced {'text' if isinstance(src, str) else 'bytes'} is not "
                        f"JSON ({str(exc)[:120]}), so the JSON path {quote(ref.path)} cannot apply "
                        "to it; pass the value itself instead."
                    ) from exc
            if isinstance(ref, JsonPointer):
                return resolve_pointer(src, ref.path, where="the referenced value")
            return query_value(src, ref.path, ref.filter, where="the referenced value")
        except (StaleSelectionError, NotJsonError) as exc:
            raise ResolveError(str(exc)) from exc

    def _literal(self, src: BytesSource) -> Any | None:
        """Stored text that is a Python-literal dump of rows, as the JSON value it stands for."""
        if not is_plain_text(src.meta.media_type) or src.meta.bytes > LITERAL_MAX:
            return None
        text = self._materialize(src)
        return literal_value(text) if isinstance(text, str) else None

    def _materialize(self, src: BytesSource) -> Any:
        with _store_errors(src.where):
            artifact = src.store.get(self.scope, src.meta.ref)
        if artifact is None:
            raise ResolveError(_gone(src.meta.ref))
        if _is_json(artifact.meta.media_type):
            return _decode_json(artifact.data)
        if is_plain_text(artifact.meta.media_type):
            return artifact.data.decode("utf-8", errors="replace")
        return artifact.data


def _is_json(media_type: str) -> bool | None:
    """True for JSON media types, False for known non-JSON ones, None when it may hold JSON."""
    if is_json(media_type):
        return True
    if base(media_type) in ("application/octet-stream", "") or is_plain_text(media_type):
        return None  # text is stored as text; JSON inside it is parsed on demand
    return False


def _require_json(src: BytesSource) -> None:
    if _is_json(src.meta.media_type) is False:
        raise ResolveError(
            f"{src.where} holds {src.meta.media_type!r}, not JSON, so a JSON path cannot apply "
            "to it."
        )


def _decode_json(data: bytes | str) -> Any:
    try:
        return decode(data)
    except Exception as exc:
        what = "text" if isinstance(data, str) else "bytes"
        raise ResolveError(f"The referenced {what} is not valid JSON ({exc}).") from exc


@contextlib.contextmanager
def _store_errors(where: str) -> Iterator[None]:
    """A store's developer-facing failure (damaged bytes or record, an unreachable backend)
    becomes a refusal the model can act on; the cause stays chained for the operator."""
    try:
        yield
    except ArtifactIntegrityError as exc:
        raise ResolveError(
            f"{where} failed its integrity check and was not used; produce it again."
        ) from exc
    except ArtifactError as exc:
        raise ResolveError(f"{where} cannot be read now ({str(exc)[:200]}).") from exc


def _guarded(chunks: Iterator[bytes], where: str) -> Iterator[bytes]:
    with _store_errors(where):
        yield from chunks


def _replace_at(value: Any, segments: list[str], new: Any) -> Any:
    """A copy of `value` with the node at `segments` replaced (only the path is copied)."""
    if not segments:
        return new
    head, rest = segments[0], segments[1:]
    if isinstance(value, dict) and head in value:
        return {**value, head: _replace_at(value[head], rest, new)}
    if isinstance(value, list) and head.isascii() and head.isdigit() and int(head) < len(value):
        out = list(value)
        out[int(head)] = _replace_at(out[int(head)], rest, new)
        return out
    return value


def handle_absent(handle: str) -> str:
    """The one refusal for a handle that names no result here: however it is absent (from an
    earlier session or before a restart, not yet shown, another conversation's, no such part),
    the same words but for the handle."""
    return (f"The handle {handle!r} names no result of this conversation: copy a handle from a "
            "ref line you were shown here, or call the tool that produced it again.")


def _gone(ref: str) -> str:
    return (
        f"Artifact {ref!r} is not available: it is missing, expired, or was never stored in "
        "this session. Call the tool that produced it again to get a fresh reference."
    )
