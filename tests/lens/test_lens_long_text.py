"""A long unbroken text (issue 39.A): the lens page for a run whose tool echoed 100,000 `x` is
served in bounded time, and the count of such a run stays a real BPE count of its pieces.

A real harness run; the page fetched over HTTP from the standard library's server."""

from __future__ import annotations

import random
import string
import time
import urllib.request
from pathlib import Path
from typing import Any

from _waits import scaled
from byref.harness import Harness, ScriptedModel, call, say
from byref.harness.tokens import O200K, _encoding
from byref.lens import Lens, load_run
from byref.store import FileStore, Scope
from byref.tools import tool
from byref.transcript import Transcript

SCOPE = Scope("acme", "alice", "long")
LONG = 100_000


def _echo_run(out: Path) -> None:
    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    out.mkdir(parents=True)
    store = FileStore(out / "store")
    script = ScriptedModel([call("echo", {"text": "x" * LONG}), say("x" * LONG)])
    with Transcript(out / "transcript.jsonl") as transcript:
        Harness(script, [echo], transcript=transcript, store=store,
                scope=SCOPE).run_sync("Echo 100,000 x.")
    store.close()


def test_the_page_for_a_100000_char_unbroken_text_is_served_in_bounded_time(
        tmp_path: Path, served: Any) -> None:
    _echo_run(tmp_path / "run")
    url = served(Lens(load_run(tmp_path / "run")))
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=scaled(60)) as response:
        body = response.read().decode()
    took = time.monotonic() - started
    assert response.status == 200 and 'data-figure="model_read_tokens"' in body
    assert took < 10, f"the lens page took {took:.1f} s"


def test_a_long_run_is_counted_in_pieces_and_ordinary_text_exactly() -> None:
    rng = random.Random(39)
    letters = "".join(rng.choice(string.ascii_lowercase) for _ in range(200_000))
    started = time.monotonic()
    tokens = O200K.count(letters)
    assert time.monotonic() - started < 10
    # Each piece is real BPE; a cut costs at most a token or so against the whole.
    assert 200_000 / 4 < tokens < 200_000 / 1.5
    assert O200K.count("x" * LONG) == len(_encoding("o200k_base").encode("x" * 4096)) * LONG // 4096
    prose = Path(__file__).read_text() * 3
    assert O200K.count(prose) == len(_encoding("o200k_base").encode(prose))
