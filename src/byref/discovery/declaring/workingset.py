"""The working set: which catalog tools are declared, as a pure projection of the transcript.

The law: no session state. Walking the transcript newest to oldest, an
`activate_tool` call adds its names (later names in one call count as more recent), a direct
call to any other tool but `search_tools` keeps it warm, a result that was stored keeps the JSON
readers (`read_json`, `query_json`) warm, and the most recently touched catalog
tools up to the budget are the set; the least recently touched fall off. `always` names (the
scaffolding) are declared anyway and take no slot. An activation the dispatcher refused (an
error result with its call id, wherever that result lies) adds nothing. Replaying a transcript
always gives the same set.

`working_set()` answers that law without walking the whole transcript: each transcript has one
`Projection` (held weakly beside it) that folds in only the messages appended since it was last
asked, so a question costs O(new messages + distinct names touched recently), never O(session).
`replayed_working_set()` is the law walked from scratch, kept as the reference the projection is
tested against.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Container, Iterable, Iterator
from typing import Any, ClassVar

from byref.defaults import WORKING_SET
from byref.discovery.catalog.catalog import Catalog
from byref.errors import InvalidValue, MisuseError
from byref.refs import Blob
from byref.transcript import Part, Transcript

DEFAULT_BUDGET = WORKING_SET
ACTIVATE = "activate_tool"
SEARCH = "search_tools"


def working_set(
    transcript: Transcript,
    catalog: Container[str],
    *,
    budget: int = DEFAULT_BUDGET,
    always: Container[str] = (),
) -> list[str]:
    """Catalog tool names to declare, most recently touched first, at most `budget`.

    `always` names (the scaffolding) are declared anyway and take no slot.
    """
    return Projection.of(transcript).working_set(catalog, budget=budget, always=always)


def replayed_working_set(
    transcript: Transcript,
    catalog: Container[str],
    *,
    budget: int = DEFAULT_BUDGET,
    always: Container[str] = (),
) -> list[str]:
    """`working_set` computed by walking the whole transcript (the law, stated directly)."""
    return _pick(touches(transcript), catalog, budget, always)


def touches(transcript: Transcript) -> Iterator[str]:
    """Every tool touch, newest first: activated names and direct calls."""
    messages = list(transcript)
    refused = {cid for message in messages for part in message.parts
               if (cid := _refused_id(part)) is not None}
    for message in reversed(messages):
        for part in reversed(message.parts):
            touch = _touch(part)
            if touch is None:
                continue
            names, call_id = touch
            if call_id is None or call_id not in refused:
                yield from reversed(names)


class Projection:
    """The working-set projection of one transcript, folded forward as messages are appended.

    Touches get increasing positions. `_log` holds, oldest first, the touches that can still
    decide a name's recency: per name, its newest *firm* touch (a direct call, or an activation
    whose result came back without error) and any activation touches newer than that still
    waiting for their result. Older touches of a name are dominated and dropped, so the log
    stays the size of the names touched, not of the session. A waiting activation counts (the
    law refuses only on an error result); its error result removes its touches. An error result
    arriving for an activation already settled (a reused call id) would need a dominated touch
    back, so the projection is then rebuilt from the transcript — exact, and rare by design.
    """

    _memo: ClassVar[weakref.WeakKeyDictionary[Transcript, Projection]] = (
        weakref.WeakKeyDictionary())
    _memo_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, transcript: Transcript) -> None:
        # Weakly: the memo maps the transcript to this projection and must not keep it alive.
        self._transcript = weakref.ref(transcript)
        self._lock = threading.Lock()
        self._generation = 0
        """Moves whenever the order of names by their newest touch may have changed (touching
        the name touched last, or settling an activation, leaves it put)."""
        self._picked: tuple[tuple[int, int | None, int], Container[str], Container[str],
                            tuple[str, ...]] | None = None
        """The last answer: (generation, catalog version, budget), catalog, always, names."""
        self._reset(transcript.origin, frozenset())

    @classmethod
    def of(cls, transcript: Transcript) -> Projection:
        """The one projection of `transcript` (created on first use, released with it)."""
        with cls._memo_lock:
            found = cls._memo.get(transcript)
            if found is None:
                found = cls._memo[transcript] = cls(transcript)
            return found

    def working_set(self, catalog: Container[str], *, budget: int = DEFAULT_BUDGET,
                    always: Container[str] = ()) -> list[str]:
        """As `working_set()`, for this projection's transcript as it is now."""
        if budget < 0:
            raise InvalidValue(f"The working-set budget must be ≥ 0, got {budget!r}.")
        with self._lock:
            self._catch_up()
            # The last answer stands while the order of names is as it was (the generation) and
            # the catalog and `always` are too: a Catalog's version moves with every change, a
            # frozenset never changes; other containers are asked again.
            version = catalog.version if isinstance(catalog, Catalog) else None
            key = (self._generation, version, budget)
            held = self._picked
            if (held is not None and version is not None and isinstance(always, frozenset)
                    and held[0] == key and held[1] is catalog and held[2] == always):
                return list(held[3])
            names = _pick((self._log[p] for p in reversed(self._log)), catalog, budget, always)
            self._picked = (key, catalog, always, tuple(names))
            return names

    # -- folding messages in -------------------------------------------------------------------
    def _reset(self, start: int, refused: frozenset[str]) -> None:
        self._generation += 1
        self._next = start
        self._pos = 0
        self._log: dict[int, str] = {}
        self._firm: dict[str, int] = {}
        self._waiting: dict[str, list[int]] = {}
        """Activation call id → positions of its touches, until its result arrives."""
        self._waiting_names: dict[str, set[int]] = {}
        """Name → positions of its waiting touches newer than its firm one."""
        self._settled: set[str] = set()
        self._refused: set[str] = set(refused)

    def _catch_up(self) -> None:
        transcript = self._transcript()
        if transcript is None:
            raise MisuseError("The transcript of this working-set projection no longer exists.")
        last = transcript.last_seq
        if last is None:
            return
        while self._next <= last:
            message = transcript.message(self._next)
            self._next += 1
            for part in message.parts:
                if not self._consume(part):  # the replay reads this message again
                    self._rebuild(transcript, last)
                    return

    def _rebuild(self, transcript: Transcript, last: int) -> None:
        """Replay up to `last` knowing every refusal in it, so no touch is ever taken back."""
        messages = [transcript.message(s) for s in range(transcript.origin, last + 1)]
        refused = frozenset(cid for m in messages for p in m.parts
                            if (cid := _refused_id(p)) is not None)
        self._reset(last + 1, refused)
        for message in messages:
            for part in message.parts:
                folded = self._consume(part)
                assert folded, "a replay that knows every refusal never retracts"

    def _consume(self, part: Part) -> bool:
        """Fold one part in; False when it retracts a settled activation (rebuild instead)."""
        if (part.type == "tool_result" and not part.is_error and not part.derived
                and part.call_id not in self._waiting):
            return True  # the common result: it touches nothing and settles no activation
        touch = _touch(part)
        if touch is not None:
            names, call_id = touch
            if call_id is None:
                for name in names:
                    self._firm_touch(name, self._append(name))
            elif call_id not in self._refused:
                for name in names:
                    pos = self._append(name)
                    self._waiting.setdefault(call_id, []).append(pos)
                    self._waiting_names.setdefault(name, set()).add(pos)
            if part.type != "tool_result":
                return True  # a stored result's touch still settles its call, below
        if part.type != "tool_result" or part.call_id is None:
            return True
        call_id = part.call_id
        if part.is_error:
            if call_id in self._refused:
                return True
            if call_id in self._settled:
                return False
            self._refused.add(call_id)
            for pos in self._waiting.pop(call_id, ()):
                gone = self._log.pop(pos, None)
                if gone is not None:
                    self._unwait(gone, pos)
                    self._generation += 1
            return True
        positions = self._waiting.pop(call_id, None)
        if positions is not None:
            self._settled.add(call_id)
            for pos in positions:
                held = self._log.get(pos)
                if held is not None:
                    self._unwait(held, pos)
                    self._firm_touch(held, pos)
        return True

    def _append(self, name: str) -> int:
        # The newest touch's name again changes no name's place in the order (dominated touches
        # dropped by `_firm_touch` are never a name's newest): the generation stays.
        if not self._log or self._log[next(reversed(self._log))] != name:
            self._generation += 1
        pos = self._pos
        self._pos += 1
        self._log[pos] = name
        return pos

    def _firm_touch(self, name: str, pos: int) -> None:
        """The touch at `pos` (in the log) can no longer be refused: older ones of `name` go.

        Any firm touch of `name` is older than `pos`: one newer would have dropped this touch
        from the log while it waited, and a dropped touch is never settled.
        """
        old = self._firm.get(name)
        if old is not None:
            self._log.pop(old, None)
        self._firm[name] = pos
        waiting = self._waiting_names.get(name)
        if waiting:
            for older in [p for p in waiting if p < pos]:
                self._log.pop(older, None)
                waiting.discard(older)
            if not waiting:
                del self._waiting_names[name]

    def _unwait(self, name: str, pos: int) -> None:
        waiting = self._waiting_names.get(name)
        if waiting is not None:
            waiting.discard(pos)
            if not waiting:
                del self._waiting_names[name]


def _pick(names: Iterable[str], catalog: Container[str], budget: int,
          always: Container[str]) -> list[str]:
    """The first `budget` distinct catalog names of `names` (newest first), skipping `always`."""
    if budget < 0:
        raise InvalidValue(f"The working-set budget must be ≥ 0, got {budget!r}.")
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        if len(out) >= budget:
            break
        if name in seen or name not in catalog or name in always:
            continue
        seen.add(name)
        out.append(name)
    return out


STORED_READERS = ("query_json", "read_json")
"""Tools a stored result's note sends the model to: a result that was stored touches them."""


def _touch(part: Part) -> tuple[list[str], str | None] | None:
    """What a part touches: its names (oldest first) and, for an activation, the call id they
    stand or fall with (None: they stand whatever the result). A result that was stored (a
    placed substitute or a marker: a stand-in for a Blob) touches the JSON readers, so a
    catalog that keeps them behind search declares them as soon as the model may need them."""
    if part.type == "tool_result":
        if not part.is_error and any(isinstance(r, Blob) for r in part.derived.values()):
            return list(STORED_READERS), None
        return None
    if part.type != "tool_call":
        return None
    value: Any = part.value if isinstance(part.value, dict) else {}
    name = part.tool or value.get("name")
    if name == ACTIVATE:
        return _names(value.get("input")), part.call_id
    if isinstance(name, str) and name != SEARCH:
        return [name], None
    return None


def _refused_id(part: Part) -> str | None:
    """The call id an error result refuses, if `part` is one."""
    if part.type == "tool_result" and part.is_error and part.call_id is not None:
        return part.call_id
    return None


def _names(raw: Any) -> list[str]:
    names = raw.get("names") if isinstance(raw, dict) else None
    if isinstance(names, str):
        return [names]
    if isinstance(names, list):
        return [n for n in names if isinstance(n, str)]
    return []
