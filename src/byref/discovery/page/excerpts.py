"""The excerpt lens: which characters of a tool's description a search result shows.

The law (its constants below): an excerpt is built from the query outward. Query-term hits
are located in the description; hits at most 36 characters apart share a window whose span is at
most 120; a greedy set cover picks the fewest windows explaining the most distinct terms; after a
12-character floor per window, the leftover budget is spread in proportion to each window's
term weight, so a rare term earns more context than several hits of a common one; windows are
joined with " … " and the excerpt never exceeds 300 characters. A window opens at its
sentence's start when its share of context reaches it, else at a word's start, and ends at a
word's end: an excerpt does not open mid-word or mid-sentence where its budget allows. A term
that hit another field (name, capabilities, glossary, parameters) is shown first with its label
("Tool name: archive work item"), so a name-only match does not render an unrelated opening. The
page budget is water-filled: equal shares, and entries that need less than their share donate
the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from byref.discovery.lexical.text import ANALYZER, Analyzer, Span

EXCERPT_MAX = 300
CLUSTER_GAP = 36
WINDOW_SPAN = 120
WINDOW_FLOOR = 12
PAGE_CHARS = 1_500
JOIN = " … "
LEAD = "… "
TAIL = "…"


class Window(NamedTuple):
    """A span of a description (start, end) and the query terms it shows (a named tuple: made
    per cluster of hits on every shown row)."""

    start: int
    end: int
    terms: frozenset[str]

    @property
    def span(self) -> int:
        """Its length in characters."""
        return self.end - self.start


def normalize(text: str) -> str:
    """Whitespace runs become one space (an excerpt is one line). `str.split` and the regex
    `\\s` agree on every code point (checked over all of Unicode); split is 4× faster."""
    return " ".join(text.split())


def windows(text: str, terms: Sequence[str], analyzer: Analyzer = ANALYZER,
            hits: Sequence[Span] | None = None) -> list[Window]:
    """Hits of `terms` in `text`, clustered: ≤36 characters apart, each window ≤120 wide.
    `hits` may be given when the caller located them already (same text, same terms)."""
    out: list[Window] = []
    start = end = -1
    found: set[str] = set()
    for term, at, to in hits if hits is not None else analyzer.spans(text, set(terms)):
        if start >= 0 and at - end <= CLUSTER_GAP and to - start <= WINDOW_SPAN:
            end = to
            found.add(term)
            continue
        if start >= 0:
            out.append(Window(start, end, frozenset(found)))
        start, end, found = at, to, {term}
    if start >= 0:
        out.append(Window(start, end, frozenset(found)))
    return out


def cover(found: Sequence[Window], weights: Mapping[str, float]) -> list[Window]:
    """Greedy set cover: the fewest windows explaining the most distinct terms (ties: more
    weight, then the narrower, then the earlier window). Returned in text order."""
    if not found:
        return []
    uncovered = set().union(*(w.terms for w in found))
    if len(uncovered) == 1:  # every window shows the one term: the narrowest, then earliest
        return [max(found, key=_narrow)]
    pool = list(found)
    picked: list[Window] = []
    while uncovered and pool:
        # `max` over (new terms, their weight, narrower, earlier), the first of equals kept; a
        # window with no new term never wins while another has one.
        best: Window | None = None
        best_key: tuple[int, float, int, int] = (0, 0.0, 0, 0)
        for w in pool:
            new = w.terms & uncovered
            if not new:
                continue
            key = (len(new), sum(weights.get(t, 1.0) for t in new), w.start - w.end, -w.start)
            if best is None or key > best_key:
                best, best_key = w, key
        if best is None:
            break
        picked.append(best)
        pool.remove(best)
        uncovered -= best.terms
    return sorted(picked, key=lambda w: w.start)


def _narrow(w: Window) -> tuple[int, int]:
    return w.start - w.end, -w.start


def allocate(chosen: Sequence[Window], weights: Mapping[str, float], content: int) -> list[int]:
    """Characters per window: its span, a floor, then the leftover ∝ the window's term weight."""
    spans = [w.span for w in chosen]
    floor = WINDOW_FLOOR if sum(spans) + WINDOW_FLOOR * len(chosen) <= content else 0
    leftover = max(0, content - sum(spans) - floor * len(chosen))
    mass = [sum(weights.get(t, 1.0) for t in w.terms) for w in chosen]
    total = sum(mass) or 1.0
    return [s + floor + round(leftover * m / total) for s, m in zip(spans, mass, strict=True)]


def excerpt(
    text: str,
    terms: Sequence[str],
    weights: Mapping[str, float],
    budget: int = EXCERPT_MAX,
    *,
    analyzer: Analyzer = ANALYZER,
    hits: Sequence[Span] | None = None,
) -> str:
    """The description excerpt for a query, at most `budget` (≤300) characters. `hits`, when
    given, are the query-term spans of the already normalized `text`."""
    budget = min(budget, EXCERPT_MAX)
    if hits is None:
        text = normalize(text)
    if len(text) <= budget:
        return text
    if budget <= len(TAIL):
        return ""
    chosen = cover(windows(text, terms, analyzer, hits), weights)
    # Windows too wide to fit together: keep the heaviest that fit, in text order.
    while chosen and _overhead(len(chosen)) + sum(w.span for w in chosen) > budget:
        if len(chosen) == 1:
            break
        lightest = min(chosen, key=lambda w: (sum(weights.get(t, 1.0) for t in w.terms), -w.start))
        chosen.remove(lightest)
    if not chosen:
        return _cut(text, budget - len(TAIL)) + TAIL
    content = budget - _overhead(len(chosen))
    extents = [_extent(text, window, size)
               for window, size in zip(chosen, allocate(chosen, weights, content), strict=True)]
    return _render(text, _merge(extents), budget)


def _extent(text: str, window: Window, size: int) -> tuple[int, int]:
    """The characters shown for `window` given `size`: half the extra each side, opening at its
    sentence's start when that is within the extra (else at a word's), ending at a word's end.
    A window clamped at either end of the text keeps what it has; the seed's figure (105
    characters for the "file" window) is exactly this."""
    extra = size - window.span
    left = extra // 2
    start, end = max(0, window.start - left), min(len(text), window.end + extra - left)
    opening = _sentence_start(text, window.start)
    if window.start - opening <= left:
        if opening > 0:  # what the left side did not need goes right
            end = min(len(text), max(end, opening + size))
        start = opening
    elif window.start - opening <= extra:  # the right side's share moves left
        start, end = opening, min(len(text), max(window.end, opening + size))
    elif start > 0 and not text[start - 1].isspace():  # forward to the next word
        space = text.find(" ", start, window.start)
        start = space + 1 if space >= 0 else window.start
    if end < len(text) and not text[end].isspace():  # back to the last word's end
        space = text.rfind(" ", window.end, end)
        end = space if space >= 0 else end
    return start, end


def _sentence_start(text: str, at: int) -> int:
    """Where the sentence holding position `at` starts (after ". ", "! ", "? " or "; ")."""
    best = 0
    for mark in (". ", "! ", "? ", "; "):
        found = text.rfind(mark, 0, at)
        if found >= 0:
            best = max(best, found + len(mark))
    return best


def _overhead(n: int) -> int:
    return len(LEAD) + len(JOIN) * (n - 1) + len(TAIL)


def _merge(extents: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(extents):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _render(text: str, extents: list[tuple[int, int]], budget: int) -> str:
    pieces = [text[s:e].strip() for s, e in extents]
    out = JOIN.join(pieces)
    if extents[0][0] > 0:
        out = LEAD + out
    if extents[-1][1] < len(text):
        out += TAIL
    if len(out) > budget:  # a single window wider than the budget
        out = _cut(out, budget - len(TAIL)) + TAIL
    return out


def _cut(text: str, limit: int) -> str:
    """`text`'s first `limit` characters, ended at a word's end when one is in the second
    half (an excerpt never ends in half a word where it can help it)."""
    head = text[:limit]
    if limit < len(text) and not text[limit].isspace():
        space = head.rfind(" ")
        head = head[:space] if space > limit // 2 else head
    return head.rstrip()


def water_fill(demands: Sequence[int], total: int, cap: int = EXCERPT_MAX) -> list[int]:
    """Split `total` characters: equal shares, each at most its demand and `cap`; what a short
    entry does not need goes to the others."""
    alloc = [0] * len(demands)
    remaining = total
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    for rank, i in enumerate(order):
        share = remaining // (len(demands) - rank)
        alloc[i] = max(0, min(demands[i], share, cap))
        remaining -= alloc[i]
    return alloc
