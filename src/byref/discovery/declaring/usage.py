"""Learning from use: the words people search with become the glossary of the tools they pick.

The law: evidence is a (query, tool) pair in which someone searched and then chose the tool
(in a transcript: a `search_tools` call, then an `activate_tool` call naming a tool that page
listed). A word enters a tool's learned glossary only when at least `min_support` distinct
queries that led to the tool used it, so one conversation's words (names, ids, anything
private) never reach the shared index; words are ranked by support × rarity across tools and
capped at `max_terms` per tool, and the raw queries are never kept. The learned text joins the
ontology's glossary field (boost ×1): it is the curated synonym layer, written by use instead
of by hand.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.discovery.declaring.workingset import ACTIVATE, SEARCH
from byref.discovery.lexical.text import ANALYZER, Analyzer
from byref.errors import InvalidValue, OperatorError
from byref.transcript import Transcript

MIN_SUPPORT = 3
MAX_TERMS = 40
"""The most words a tool's usage entry keeps (each seen in at least three searches). How it was
chosen: docs/NOTES.md#max-terms."""


class UsageError(OperatorError, ValueError):
    """A usage file line is not a {"query", "tool"} object (the text says which line)."""


@dataclass(frozen=True, slots=True)
class SearchUsage:
    """One piece of evidence: `query` was searched and `tool` was chosen from its results."""

    query: str
    tool: str

    def to_json(self) -> dict[str, str]:
        """`{"query": …, "tool": …}`, one usage line."""
        return {"query": self.query, "tool": self.tool}


def query_key(query: str) -> str:
    """A query as evidence counts it, case and spacing aside ("Rain  Tomorrow", "rain tomorrow")."""
    return " ".join(query.lower().split())


def usage_from_transcript(transcript: Transcript) -> list[SearchUsage]:
    """The (query, tool) pairs a transcript holds, oldest first.

    An activation counts for the latest search before it whose page listed the tool; refused
    calls (errors) count for nothing, and a tool activated without such a search teaches
    nothing about search words.
    """
    fold = UsageFold()
    for message in transcript:
        fold.feed(message.parts)
    return fold.found


class UsageFold:
    """`usage_from_transcript` folded one message at a time: `catch_up(transcript)` reads only
    the messages it has not seen, so a long conversation costs each activation its news only.
    Holds the calls still awaiting a result and, per tool, the latest query that listed it."""

    def __init__(self) -> None:
        self._next: int | None = None
        self._pending: dict[str, tuple[str, Any]] = {}
        """call id → (tool, input) of calls whose result has not been seen yet."""
        self._listed: dict[str, str] = {}
        """tool name → the latest successful query whose page listed it."""
        self.found: list[SearchUsage] = []

    def catch_up(self, transcript: Transcript) -> list[SearchUsage]:
        """Fold in the messages added since the last call; returns the evidence they added."""
        last = transcript.last_seq
        before = len(self.found)
        if last is None:
            return []
        seq = transcript.origin if self._next is None else self._next
        while seq <= last:
            self.feed(transcript.message(seq).parts)
            seq += 1
        self._next = seq
        return self.found[before:]

    def feed(self, parts: Iterable[Any]) -> None:
        """Fold in message parts: a successful activation of a tool a successful search
        listed adds (that query, the tool) to `found`."""
        for part in parts:
            value: Any = part.value
            if part.type == "tool_call" and part.call_id is not None:
                name = part.tool or (value.get("name") if isinstance(value, dict) else None)
                data = value.get("input") if isinstance(value, dict) else None
                self._pending[part.call_id] = (str(name), data)
            elif part.type == "tool_result" and part.call_id in self._pending:
                name, data = self._pending.pop(str(part.call_id))
                if part.is_error or not isinstance(data, dict):
                    continue
                if name == SEARCH:
                    query = data.get("query")
                    if isinstance(query, str) and query.strip():
                        for tool in _page_names(value):
                            self._listed[tool] = query
                elif name == ACTIVATE:
                    names = data.get("names")
                    for tool in [names] if isinstance(names, str) else names or ():
                        if isinstance(tool, str) and tool in self._listed:
                            self.found.append(SearchUsage(self._listed[tool], tool))


def _page_names(result: Any) -> Iterator[str]:
    rows = result.get("results") if isinstance(result, dict) else None
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict) and isinstance(row.get("name"), str):
            yield row["name"]


def read_usage(path: Path, *, torn_tail: bool = False) -> list[SearchUsage]:
    """JSON lines of {"query": …, "tool": …} (blank lines skipped). `torn_tail`: a last line
    that lacks its newline and does not parse is an append a crash cut short, and is skipped."""
    text = path.read_text("utf-8")
    lines = text.splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(_usage(line, path, number))
        except UsageError:
            if torn_tail and number == len(lines) and not text.endswith("\n"):
                break
            raise
    return out


def _usage(line: str, path: Path, number: int) -> SearchUsage:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{str(path)!r} line {number} is not JSON: {exc.msg}.") from None
    if not (isinstance(raw, dict) and isinstance(raw.get("query"), str)
            and isinstance(raw.get("tool"), str)):
        raise UsageError(
            f"{str(path)!r} line {number} must be an object with string fields 'query' "
            'and \'tool\', e.g. {"query": "weather in Oslo", "tool": "get_forecast"}.'
        )
    return SearchUsage(raw["query"], raw["tool"])


class UsageLog:
    """A JSON-lines usage file that grows as evidence arrives (the gateway keeps one across
    sessions). The raw queries stay in this operator-owned file; only words with enough
    support reach the shared index through `learn_glossary`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> list[SearchUsage]:
        """Every piece of evidence so far (none if the file does not exist yet; a last line a
        crash cut short is skipped)."""
        with self._lock:
            return read_usage(self.path, torn_tail=True) if self.path.exists() else []

    def append(self, usages: Iterable[SearchUsage]) -> int:
        """Adds evidence (whole lines, flushed); returns how many lines were written."""
        lines = "".join(json.dumps(u.to_json(), ensure_ascii=False) + "\n" for u in usages)
        if not lines:
            return 0
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(lines)
        return lines.count("\n")


def learn_glossary(
    usages: Iterable[SearchUsage],
    *,
    min_support: int = MIN_SUPPORT,
    max_terms: int = MAX_TERMS,
    analyzer: Analyzer = ANALYZER,
) -> dict[str, str]:
    """Tool name → learned glossary text (its words, each repeated ∝ log₂ of its support).

    Deterministic: ties are broken by the word itself, so the same usage gives the same text.
    """
    if min_support < 1 or max_terms < 1:
        raise InvalidValue(
            f"min_support and max_terms must be ≥ 1, got {min_support!r} and {max_terms!r}."
        )
    support: dict[str, Counter[str]] = defaultdict(Counter)
    spelled: dict[str, Counter[str]] = defaultdict(Counter)
    seen: set[tuple[str, str]] = set()
    for usage in usages:
        key = (usage.tool, query_key(usage.query))
        if key in seen:  # the same query twice is one piece of evidence
            continue
        seen.add(key)
        terms: dict[str, str] = {}
        for word, _, _ in analyzer.words(usage.query):
            term = analyzer.stem(word)
            if term:
                terms.setdefault(term, word)
        for term, word in terms.items():
            support[usage.tool][term] += 1
            spelled[term][word] += 1
    kept = {tool: {t: n for t, n in counts.items() if n >= min_support}
            for tool, counts in support.items()}
    tools_using = Counter(t for counts in kept.values() for t in counts)
    total = len(kept)
    out: dict[str, str] = {}
    for tool, counts in sorted(kept.items()):
        ranked = sorted(counts.items(), key=lambda tn: (
            -tn[1] * math.log((total + 1) / (tools_using[tn[0]] + 1)), tn[0]))
        words: list[str] = []
        for term, n in ranked[:max_terms]:
            word = min(spelled[term].items(), key=lambda wc: (-wc[1], wc[0]))[0]
            words.extend([word] * max(1, round(math.log2(n))))
        if words:
            out[tool] = " ".join(words)
    return out
