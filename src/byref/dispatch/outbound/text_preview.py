"""The preview of a placed text: its error lines first, then its head, then its last lines.

The law: a preview is cut from the original text (every line is a whole line of it, or a piece
of one marked `…` where it was cut) and costs time in the characters it examines, not in the
size of the text. The head and the tail are read from a window at each end; the error scan
(C-speed `find` over ASCII-lowered bytes, never a loop over lines) reads forward in growing
windows and stops as soon as the error share of the budget is full, so a log with errors near
its start is previewed from a short prefix, and one with few errors is read once, at `find`
speed (a few ms per MB).

Why a tail: a log's last lines say how the run ended (a summary, an exit status, where a crash
cut it off), which neither its head nor its error words reliably show. It costs one window at
the end and at most a fifth of the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

ERROR_WORDS = ("error", "fail", "exception")
"""A line holding one of these, in any ASCII case, is an error line."""
_WORDS = tuple(w.encode() for w in ERROR_WORDS)
CUT = "…"
"""Marks where a line was cut (it was longer than the room left for it)."""
_ERROR_SHARE = 3 / 5  # the head always keeps some room, however many errors there are
_TAIL_SHARE = 1 / 5
_FIRST_WINDOW = 4_096
_MAX_WINDOW = 1 << 20


class Text(Protocol):
    """What a preview reads: a length and slices (a `str`, or a lazily read source)."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> str: ...


@dataclass(frozen=True, slots=True)
class TextPreview:
    """A bounded preview of a long text result: the text shown and how many of its lines were
    lifted for holding an error word."""
    text: str
    errors: int
    """Lines shown first because they contain an error word."""
    head: int
    tail: int
    cut: bool = False

    def note(self) -> str | None:
        """How the preview was cut, when it is not simply the text's first lines."""
        if not self.errors and not self.tail and not self.cut:
            return None
        parts = [f"{_lines(self.errors)} matching error/fail/exception"] if self.errors else []
        parts.append(f"the first {_lines(self.head)}")
        if self.tail:
            parts.append(f"the last {_lines(self.tail)}")
        cut = f"; {CUT} marks where a line was cut" if self.cut else ""
        return "The preview shows " + ", then ".join(parts) + cut + "."


def _lines(n: int) -> str:
    return f"{n:,} line" if n == 1 else f"{n:,} lines"


@dataclass(slots=True)
class _Picked:
    room: int
    lines: list[str] = field(default_factory=list)
    used: int = 0
    cut: bool = False

    def add(self, line: str, *, cut: bool = False) -> bool:
        """Add `line` (and its newline) if it fits the room."""
        if self.used + len(line) + 1 > self.room:
            return False
        self.lines.append(line)
        self.used += len(line) + 1
        self.cut |= cut
        return True


def text_preview(text: Text, budget: int) -> TextPreview:
    """At most `budget` characters of `text`: error lines, then the head, then the tail."""
    size = len(text)
    if size <= budget:  # it all fits: the whole text, in its order, is the honest preview
        whole = text[0:size]
        return TextPreview(whole.removesuffix("\n"), 0, len(whole.splitlines()), 0)
    tail = _Picked(int(budget * _TAIL_SHARE))
    stop = _tail(text, size, tail)
    errors = _Picked(int(budget * _ERROR_SHARE))
    shown = _errors(text, stop, size, errors)
    head = _Picked(budget - errors.used - tail.used)
    _head(text, stop, size, shown, errors.used, head)
    return TextPreview("\n".join([*errors.lines, *head.lines, *tail.lines]), len(errors.lines),
                       len(head.lines), len(tail.lines), errors.cut or head.cut or tail.cut)


def _line(raw: str) -> str:
    return raw.removesuffix("\r")


def _tail(text: Text, size: int, tail: _Picked) -> int:
    """Fill `tail` with the text's last lines; returns where the tail begins."""
    inner = tail.room - 1 - len(CUT)
    if inner < 1:
        return size
    start = max(0, size - tail.room - 1)  # one character more: is the first line whole?
    window = text[start:size]
    end = len(window) - 1 if window.endswith("\n") else len(window)
    picked: list[str] = []
    begin = used = 0
    while True:
        nl = window.rfind("\n", 0, end)
        if nl < 0 and start > 0:
            break  # this line began before the window, so it is too long to show whole
        line = _line(window[nl + 1:end])
        if used + len(line) + 1 > tail.room:
            break
        picked.append(line)
        used += len(line) + 1
        begin = nl + 1
        if nl < 0:
            break
        end = nl
    if picked:
        for line in reversed(picked):
            tail.add(line)
        return start + begin
    # One last line longer than the tail's room: show its end, marked as cut.
    tail.add(CUT + _line(window[end - inner:end]), cut=True)
    return start + end - inner


def _errors(text: Text, stop: int, size: int, errors: _Picked) -> set[int]:
    """Fill `errors` with lines holding an error word, reading forward from the start, and stop
    reading once the error share is full; returns the start offsets of the lines shown."""
    shown: set[int] = set()
    pos, width, at_line_start = 0, _FIRST_WINDOW, True
    while pos < stop:
        window = text[pos:min(stop, pos + width)]
        end = len(window)
        if pos + end < stop:
            end = window.rfind("\n") + 1
            if end == 0 and width < _MAX_WINDOW:
                width *= 2  # no line ends in this window: read a wider one (geometric)
                continue
            end = end or len(window)  # a line over 1 MiB is scanned in pieces
        chunk = window[:end]
        ends_whole = chunk.endswith("\n") or pos + end == size
        words = _Words(chunk)
        while (found := words.next()) is not None:
            (start, stop_at), match = found
            whole = (start > 0 or at_line_start) and (stop_at < len(chunk) or ends_whole)
            if whole and errors.add(_line(chunk[start:stop_at])):
                shown.add(pos + start)
                continue
            if not errors.lines:  # the first error line is too long: show a piece of it
                errors.add(_around(chunk, match, start, stop_at, errors.room - 1,
                                   cut_left=not (start > 0 or at_line_start),
                                   cut_right=not (stop_at < len(chunk) or ends_whole)), cut=True)
            return shown  # the error share is full: read no further
        pos += end
        at_line_start = ends_whole
        width = min(width * 2, _MAX_WINDOW)
    return shown


class _Words:
    """The lines of one chunk that hold an error word, in order.

    Found with `bytes.find` over the chunk's UTF-8 with ASCII letters lowered: C speed (a
    case-insensitive regex scans 20-30x slower), and, unlike `str.lower`, it never changes a
    length, so offsets map back to the original characters exactly.
    """

    def __init__(self, chunk: str) -> None:
        self.data = chunk.encode("utf-8", "surrogatepass").lower()
        self.ascii = len(self.data) == len(chunk)
        self.at = 0
        self.ahead = [-2] * len(_WORDS)  # next hit of each word at or after `at` (-1: none)
        self.byte = self.char = 0

    def next(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """((line start, line end), (word start, word end)) in characters, or None."""
        data, at = self.data, self.at
        best = -1
        for i, word in enumerate(_WORDS):
            if -1 != self.ahead[i] < at:
                self.ahead[i] = data.find(word, at)
            hit = self.ahead[i]
            if hit >= 0 and (best < 0 or hit < self.ahead[best]):
                best = i
        if best < 0:
            return None
        hit = self.ahead[best]
        start = data.rfind(b"\n", 0, hit) + 1
        nl = data.find(b"\n", hit + len(_WORDS[best]))
        end = len(data) if nl < 0 else nl
        self.at = end + 1
        # In order (start <= hit <= end), so the byte-to-character cursor only moves forward.
        line_start, word_start = self._char(start), self._char(hit)
        word_end = self._char(hit + len(_WORDS[best]))
        return (line_start, self._char(end)), (word_start, word_end)

    def _char(self, byte: int) -> int:
        if self.ascii:
            return byte
        self.char += len(self.data[self.byte:byte].decode("utf-8", "surrogatepass"))
        self.byte = byte
        return self.char


def _around(chunk: str, match: tuple[int, int], start: int, end: int, room: int, *,
            cut_left: bool, cut_right: bool) -> str:
    """A piece of the line `chunk[start:end]` around `match`, marked where it was cut."""
    inner = max(0, room - 2 * len(CUT))
    left = max(start, match[0] - max(0, inner - (match[1] - match[0])) // 2)
    right = min(end, left + inner)
    left = max(start, right - inner)
    return ((CUT if cut_left or left > start else "") + chunk[left:right]
            + (CUT if cut_right or right < end else ""))


def _head(text: Text, stop: int, size: int, shown: set[int], skipped: int,
          head: _Picked) -> None:
    """Fill `head` with the first lines not already shown as error lines."""
    # The lines it skips are error lines already shown, so they total at most `skipped`.
    window = text[0:min(stop, head.room + 1 + skipped)]
    pos = 0
    while pos < len(window):
        nl = window.find("\n", pos)
        if nl < 0 and len(window) < size:
            break  # the line runs past the window or into the tail: it is not whole here
        end = len(window) if nl < 0 else nl
        if pos not in shown and not head.add(_line(window[pos:end])):
            break
        pos = end + 1
    if not head.lines and pos < len(window) and pos not in shown:
        # The first line is longer than the whole room: its beginning, marked as cut.
        line_end = window.find("\n", pos)
        piece = window[pos:min(pos + head.room - 1 - len(CUT),
                               len(window) if line_end < 0 else line_end)]
        if piece:
            head.add(piece + CUT, cut=True)
