"""Per-turn cost: what the model saw, against what inlining every value would have cost.

The law: the visible side is counted exactly as the ledger counts it (`byref.harness.ledger`):
a user or tool part is its rendered text (else its value as text), an assistant part is its text
or its call's input as JSON, tokens by `count_tokens` part by part; so the page's totals equal
the run's ledger. The inlined side replaces each value that stood in for stored data (a part's
`derived` entries) with that data in full: a stored blob by its bytes (binary as base64, as a
naive harness would inline it), a recipe by the JSON it selects, streamed and never held whole.
Its tokens are counted on a leading sample and scaled, and the page says so. A code run's
inner calls, read from its record, are counted the same way (`Costs.moved`): each stored value
an inner call returned as a handle is data a naive harness would have shown the model, and each
handle the program passed on is a ref passed.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from byref.harness.tokens import count_tokens
from byref.jsonview import dumps
from byref.lens.reading.calls import Call, RefUse
from byref.lens.reading.run import Run
from byref.media import is_text
from byref.refs import Blob, JsonQuery, MessageRef, Ref, RefRefusal, envelope
from byref.store import ArtifactError
from byref.transcript import Part

SAMPLE_CHARS = 200_000
"""Characters of an inlined value whose tokens are counted exactly; the rest is scaled."""


@dataclass(frozen=True, slots=True)
class Size:
    """A size in characters and tokens."""
    chars: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Turn:
    """One message's sizes: what the model saw, and what it would have seen with refs inlined."""
    seq: int
    role: str
    label: str
    visible: Size
    inlined: Size
    refs: int = 0
    """Refs the model wrote in this message's calls (values passed instead of retyped)."""


@dataclass(frozen=True, slots=True)
class Moved:
    """What code runs moved by handle, from their records."""
    returned: Size
    """The stored values inner calls returned as handles (the model read none of them)."""
    passed: int
    """Handles the programs passed as arguments to inner calls."""
    passed_size: Size
    """The data those handles named."""


def visible_text(role: str, part: Part) -> str:
    """Exactly what the ledger counts for one part."""
    if role == "assistant":
        return str(part.value) if part.type == "text" else dumps(part.value["input"])
    return part.rendered if part.rendered is not None else str(part.value)


class Costs:
    """Computes turns once per run (inlined sizes stream stored data) and remembers each
    stand-in's full size, so a ref used twice is measured once."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._full: dict[str, Size] = {}
        self.unknown: dict[str, str] = {}
        """Stand-ins whose full size could not be measured, and why (counted as 0)."""

    def turns(self) -> list[Turn]:
        """Each message's visible and inlined sizes."""
        out: list[Turn] = []
        for message in self.run.transcript:
            vis_c = vis_t = inl_c = inl_t = refs = 0
            labels: list[str] = []
            for index, part in enumerate(message.parts):
                if message.role == "assistant":
                    refs += len(_roots(dict(part.derived)))
                text = visible_text(message.role, part)
                tokens = count_tokens(text)
                vis_c += len(text)
                vis_t += tokens
                full = self.inlined(message.role, message.seq, index, part, Size(len(text), tokens))
                inl_c += full.chars
                inl_t += full.tokens
                labels.append(_label(part))
            out.append(Turn(message.seq, message.role, ", ".join(labels), Size(vis_c, vis_t),
                            Size(inl_c, inl_t), refs))
        return out

    def moved(self, found: list[Call]) -> Moved:
        """Sum the data `found`'s code runs moved by handle (artifact-backed refs only: an
        inner Message ref names the record's transcript, not the run's)."""
        returned, passed = Size(0, 0), Size(0, 0)
        count = 0
        for call in found:
            for inner in call.inner:
                results = inner.result.returns if inner.result is not None else []
                for use in _root_uses(results):
                    returned = _plus(returned, self.full(use.ref))
                for use in _root_uses(inner.takes):
                    count += 1
                    passed = _plus(passed, self.full(use.ref))
        return Moved(returned, count, passed)

    def inlined(self, role: str, seq: int, index: int, part: Part, shown: Size) -> Size:
        """The size of a part with every ref replaced by the value it names."""
        roots = _roots(dict(part.derived))
        if not roots:
            return shown
        if role == "assistant":
            # The call as written, with each ref's envelope swapped for the value it names.
            chars, tokens = shown.chars, shown.tokens
            for ref in roots.values():
                stand_in = dumps(envelope(ref))
                full = self.full(ref)
                chars += full.chars - len(stand_in)
                tokens += full.tokens - count_tokens(stand_in)
            return Size(chars, tokens)
        # A result that stood in for data: the naive harness shows the data instead.
        sizes = [self.full(ref) for ref in roots.values()]
        return Size(sum(s.chars for s in sizes), sum(s.tokens for s in sizes))

    def full(self, ref: Ref) -> Size:
        """The size of the value `ref` names (unknown values are noted and counted as 0)."""
        key = dumps(ref.to_json())
        if key not in self._full:
            try:
                self._full[key] = self._measure(ref)
            except (RefRefusal, ArtifactError) as exc:
                # Expired, swept or unreadable data: the page says so instead of failing.
                self.unknown[key] = str(exc)
                self._full[key] = Size(0, 0)
        return self._full[key]

    def _measure(self, ref: Ref) -> Size:
        if isinstance(ref, MessageRef) and ref.seq is not None:
            part = self.run.transcript.part(ref.seq, ref.part)
            stand_in = part.derived.get(ref.field or "")
            if stand_in is not None:
                return self.full(stand_in)
        if isinstance(ref, Blob) and ref.key is not None:
            return self._blob(ref.key)
        scope = self.run.scope_of(ref)
        resolver = self.run.resolver(scope)
        if isinstance(ref, JsonQuery):
            return _sized(_array_text(resolver.iterate(ref)))
        return _sized(iter([dumps(resolver.value(ref))]))

    def _blob(self, key: str) -> Size:
        found = self.run.head(key)
        if found is None:
            raise RefRefusal(f"Artifact {key!r} is absent (missing, expired, or another scope's).")
        meta = found[1]
        textual = is_text(meta.media_type)
        chars = meta.bytes if textual else 4 * ((meta.bytes + 2) // 3)
        got = self.run.get(key)
        if got is None or chars == 0:
            return Size(chars, 0)
        head = got[1][: SAMPLE_CHARS]
        sample = (head.decode("utf-8", "replace") if textual
                  else base64.b64encode(head).decode())[:SAMPLE_CHARS]
        return Size(chars, _scale(count_tokens(sample), len(sample), chars))


def _plus(a: Size, b: Size) -> Size:
    return Size(a.chars + b.chars, a.tokens + b.tokens)


def _root_uses(uses: list[RefUse]) -> list[RefUse]:
    """The artifact-backed uses not below another use (a handle counted once)."""
    roots = _roots({u.path: u.ref for u in uses})
    return [u for u in uses if u.path in roots and u.key is not None]


def _array_text(items: Iterator[Any]) -> Iterator[str]:
    yield "["
    for n, item in enumerate(items):
        yield ("," if n else "") + dumps(item)
    yield "]"


def _sized(pieces: Iterator[str]) -> Size:
    chars = 0
    sample: list[str] = []
    kept = 0
    for piece in pieces:
        chars += len(piece)
        if kept < SAMPLE_CHARS:
            sample.append(piece[: SAMPLE_CHARS - kept])
            kept += len(sample[-1])
    text = "".join(sample)
    return Size(chars, _scale(count_tokens(text), len(text), chars))


def _scale(tokens: int, sampled: int, total: int) -> int:
    return tokens if sampled >= total or sampled == 0 else round(tokens * total / sampled)


def _roots(derived: dict[str, Ref]) -> dict[str, Ref]:
    """Entries not below another entry ("" stands for the whole part)."""
    if "" in derived:
        return {"": derived[""]}
    return {k: r for k, r in derived.items()
            if not any(o != k and k.startswith(o + ".") for o in derived)}


def _label(part: Part) -> str:
    if part.type == "text":
        return "text"
    name = part.tool or (part.value.get("name") if isinstance(part.value, dict) else None)
    return f"{part.type.replace('_', ' ')} {name}" if name else part.type.replace("_", " ")
