"""Previews of placed text: cut from the original, within budget, and bounded in what they read."""

from __future__ import annotations

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.dispatch import Policy
from byref.dispatch.outbound.placement import settle
from byref.dispatch.outbound.text_preview import CUT, ERROR_WORDS, text_preview
from byref.store import MemoryStore, Scope


class Watched:
    """A text that counts the characters a preview slices out of it, and refuses to be read
    in `forbidden` (a half-open range), so a test can tell what a preview looked at."""

    def __init__(self, text: str, forbidden: tuple[int, int] = (0, 0)) -> None:
        self.text, self.forbidden = text, forbidden
        self.read = 0

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, key: slice, /) -> str:
        start, stop, _ = key.indices(len(self.text))
        lo, hi = self.forbidden
        assert stop <= lo or start >= hi, f"read {start}:{stop}, inside {lo}:{hi}"
        self.read += max(0, stop - start)
        return self.text[key]


def log(size: int, every: int = 2) -> str:
    lines, total, i = [], 0, 0
    while total < size:
        line = (f"12:00:{i % 60:02d} worker-{i % 7} ERROR request {i} timed out\n"
                if i % every == 0 else f"12:00:{i % 60:02d} worker-{i % 7} served request {i}\n")
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)


def _is_cut_from(line: str, original: str) -> bool:
    whole = {ln.removesuffix("\r") for ln in original.split("\n")} | set(original.split("\n"))
    if line in whole:
        return True
    core = line.removeprefix(CUT).removesuffix(CUT)
    return core != line and core in original


_ALPHABET = st.sampled_from(["a", "Z", " ", "\n", "\n", "\r", "é", "→", "💥", CUT, "ERROR",
                             "fail", "Exception", "x" * 50, "\n\n"])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_ALPHABET, max_size=400).map("".join), st.integers(min_value=20, max_value=600))
@example("a\n" * 10 + "x" * 5000, 100)
@example("y" * 3000 + " error " + "z" * 3000, 100)
@example("ok\n" * 50 + "→ FAIL\n" + "é" * 400, 120)
def test_every_preview_line_is_cut_from_the_original_and_the_preview_fits(
        text: str, budget: int) -> None:
    preview = text_preview(text, budget)
    assert len(preview.text) <= budget
    lines = preview.text.split("\n") if preview.text else []
    assert all(_is_cut_from(ln, text) for ln in lines), (text, preview)
    # The lines shown for their error words come first, and each holds one.
    assert all(any(w in ln.lower() for w in ERROR_WORDS) for ln in lines[:preview.errors])
    assert preview.errors + preview.head + preview.tail == len(lines) or len(text) <= budget


def test_error_lines_come_first_then_the_head_then_the_last_lines() -> None:
    lines = [f"step {i} ok" for i in range(200)]
    lines[3] = "step 3 Error: disk full"
    lines[150] = "step 150 FAILED to retry"
    lines[-1] = "exit status 1"
    text = "\n".join(lines) + "\n"
    preview = text_preview(text, 300)
    shown = preview.text.split("\n")
    assert shown[:2] == ["step 3 Error: disk full", "step 150 FAILED to retry"]
    assert shown[2:5] == ["step 0 ok", "step 1 ok", "step 2 ok"]  # the head skips line 3
    assert "step 4 ok" in shown
    assert shown[-1] == "exit status 1"  # the tail: how the run ended
    assert preview.errors == 2 and shown[-preview.tail:] == lines[-preview.tail:]
    assert preview.note() == (f"The preview shows 2 lines matching error/fail/exception, then "
                              f"the first {preview.head} lines, then the last {preview.tail} "
                              "lines.")


def test_a_4mb_log_is_previewed_from_a_bounded_prefix_and_its_last_lines() -> None:
    text = log(4 * 1024 * 1024)
    watched = Watched(text, forbidden=(64 * 1024, len(text) - 1024))
    preview = text_preview(watched, 1_000)
    assert watched.read < 16 * 1024  # of 4 MiB: a prefix window, the head and the tail
    assert preview.text.startswith("12:00:00 worker-0 ERROR request 0 timed out\n")
    assert preview.errors > 5 and preview.head > 0 and preview.tail > 0
    again = Watched(log(1024 * 1024))
    text_preview(again, 1_000)
    assert again.read == watched.read  # the same work at a quarter of the size


def test_a_log_with_one_error_is_read_once_to_find_it() -> None:
    text = log(2 * 1024 * 1024, every=10**9).replace("ERROR request 0", "request 0", 1)
    middle = len(text) // 2
    cut = text.index("\n", middle) + 1
    text = text[:cut] + "12:30:00 worker-3 Exception in thread main\n" + text[cut:]
    watched = Watched(text)
    preview = text_preview(watched, 1_000)
    assert preview.text.startswith("12:30:00 worker-3 Exception in thread main\n")
    assert watched.read < len(text) * 1.05  # one pass, never a second one


def test_a_line_longer_than_the_budget_is_shown_cut_and_marked() -> None:
    text = "{" + '"k": "v", ' * 10_000 + "}"
    preview = text_preview(text, 200)
    head, tail = preview.text.split("\n")
    assert head.endswith(CUT) and text.startswith(head.removesuffix(CUT))
    assert tail.startswith(CUT) and text.endswith(tail.removeprefix(CUT))
    assert preview.cut and CUT in (preview.note() or "")


def test_error_lines_keep_their_place_in_text_with_wide_characters() -> None:
    text = "".join(f"→ étape {i} réussie 💥\n" for i in range(500)) + "→ échec: ERROR ü\n"
    text += "".join(f"→ étape {i} réussie\n" for i in range(500))
    assert text_preview(text, 400).text.startswith("→ échec: ERROR ü\n")


def test_a_placed_log_says_how_its_preview_was_cut_and_how_to_read_the_rest() -> None:
    text = log(64 * 1024)
    store = MemoryStore()
    placed = settle(text, text, tool="tail_log", ceiling=None, result_kind=None, is_error=False,
                    policy=Policy(placed_preview_chars=1_000), store=store,
                    scope=Scope("t", conversation="c"))
    summary = msgspec.json.decode(placed.text)
    assert placed.how == "placed" and len(summary["preview"]) <= 1_000
    assert summary["previewNote"].startswith("The preview shows ")
    assert "read_result" in summary["note"]
