"""Property tests for the analyzer (tokenizer) and the tools/list parser."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.discovery.catalog.mcp import ListingError, parse_listing
from byref.discovery.lexical.text import ANALYZER, Analyzer

lower_words = st.lists(st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8),
                       min_size=1, max_size=6)


@given(st.text())
def test_analysis_never_fails_and_spans_agree_with_terms(text: str) -> None:
    terms = ANALYZER.terms(text)
    assert all(terms)
    assert Counter(s.term for s in ANALYZER.spans(text)) == Counter(terms)
    for span in ANALYZER.spans(text):
        assert 0 <= span.start < span.end <= len(text)


@given(st.text())
def test_document_terms_are_the_same_multiset_as_terms(text: str) -> None:
    fresh = Analyzer()
    assert Counter(fresh.terms_of_all([text, text[::-1]])) == Counter(
        ANALYZER.terms(text + "\n" + text[::-1]))


@given(st.text())
def test_query_terms_are_the_distinct_terms_in_first_seen_order(text: str) -> None:
    terms = ANALYZER.terms(text)
    query = ANALYZER.query_terms(text)
    assert len(query) == len(set(query)) == len(set(terms))
    assert query == sorted(set(terms), key=terms.index)


@given(lower_words)
def test_snake_kebab_and_spaces_analyze_alike(words: list[str]) -> None:
    spaced = ANALYZER.terms(" ".join(words))
    assert ANALYZER.terms("_".join(words)) == spaced
    assert ANALYZER.terms("-".join(words)) == spaced
    assert ANALYZER.terms(":".join(words)) == spaced


@given(lower_words)
def test_camel_case_splits_into_the_same_words(words: list[str]) -> None:
    camel = words[0] + "".join(w.capitalize() for w in words[1:])
    spaced = ANALYZER.terms(" ".join(words))
    terms = ANALYZER.terms(camel)
    assert terms[: len(spaced)] == spaced
    # A word with a camel boundary is also indexed whole (GitHub → git, hub, github).
    assert len(terms) - len(spaced) == (1 if len(words) > 1 else 0)


@given(lower_words)
def test_stop_words_and_case_do_not_matter(words: list[str]) -> None:
    text = " ".join(words)
    assert ANALYZER.terms(f"the {text} of a") == ANALYZER.terms(text)
    assert ANALYZER.terms(text.upper()) == ANALYZER.terms(text)


def test_known_splits() -> None:
    assert ANALYZER.terms("getFileContents") == ["get", "file", "content", "getfilecont"]
    assert ANALYZER.terms("HTTPServer listS3Buckets PDFs") == [
        "http", "server", "list", "s3", "bucket", "pdf", "httpserver", "lists3bucket"]
    assert ANALYZER.terms("I'm searching for GitHub") == ["search", "git", "hub", "github"]
    # The filler of a request is dropped like any stop word.
    assert ANALYZER.terms("Could you kindly provide detailed information on stocks") == ["stock"]


tool_names = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
                     min_size=1, max_size=20)
tool_items = st.lists(
    st.fixed_dictionaries(
        {"name": tool_names},
        optional={"description": st.text(max_size=40),
                  "inputSchema": st.one_of(st.just({}), st.just({"type": "object"}),
                                           st.just({"properties": {"a": {"type": "string"}}}))},
    ),
    max_size=8,
)


@given(tool_items, st.booleans())
def test_parser_keeps_every_tool_in_order(items: list[dict[str, object]], wrapped: bool) -> None:
    raw: object = {"server": "svc", "tools": items} if wrapped else items
    listed = parse_listing(raw, server="stem", where="'x.json'")
    assert [t.name for t in listed] == [i["name"] for i in items]
    assert {t.server for t in listed} <= {"svc" if wrapped else "stem"}
    assert all(t.input_schema["type"] == "object" and "properties" in t.input_schema
               for t in listed)


@pytest.mark.parametrize(("raw", "message"), [
    ("nope", "expected a list of tools or an object with 'tools', got 'str'"),
    ({"tools": 3}, "expected a 'tools' list, got 'int'"),
    ([{"description": "x"}], "tool #0 has no 'name' string"),
    ([{"name": "a", "inputSchema": []}], "tool 'a' has a non-object inputSchema"),
])
def test_parser_refuses_malformed_listings(raw: object, message: str) -> None:
    with pytest.raises(ListingError) as info:
        parse_listing(raw, server="s", where="'f.json'")
    assert str(info.value) == f"'f.json': {message}."


@given(st.text(), st.lists(st.sampled_from(["file", "read", "git", "github", "pdf", "x1", "é"]),
                           max_size=3))
def test_locating_hits_equals_filtering_the_full_scan(text: str, words: list[str]) -> None:
    wanted = {ANALYZER.stem(w) for w in words} | {s.term for s in ANALYZER.spans(text)[:2]}
    expected = [s for s in ANALYZER.spans(text) if s.term in wanted]
    assert ANALYZER.spans(text, wanted) == expected


@given(st.text(), st.lists(st.sampled_from(["file", "read", "git", "github", "pdf", "x1", "é"]),
                           max_size=3))
def test_hits_among_words_split_once_equal_the_full_scan(text: str, words: list[str]) -> None:
    """A page splits each shown tool's description once (`page.texts`) and locates each
    search's terms among those words."""
    wanted = {ANALYZER.stem(w) for w in words} | {s.term for s in ANALYZER.spans(text)[:2]}
    expected = [s for s in ANALYZER.spans(text) if s.term in wanted]
    assert ANALYZER.hits(text, wanted, ANALYZER.words_of(text)) == expected
    cold = Analyzer()
    assert cold.hits(text, wanted, cold.words_of(text)) == expected


def test_locating_hits_on_camel_and_plural_words() -> None:
    text = "Upload PDFs to GitHub; profile files, not a gitHub-like thing."
    got = [(s.term, text[s.start:s.end]) for s in ANALYZER.spans(text, {"pdf", "github", "file"})]
    assert got == [("pdf", "PDFs"), ("github", "GitHub"), ("file", "files"), ("github", "gitHub")]


@given(st.lists(st.lists(st.text(), max_size=3), max_size=5))
def test_learning_texts_in_one_batch_gives_each_its_own_terms(groups: list[list[str]]) -> None:
    """An index build analyzes a catalog in one batch (`terms_of_each`): each group's terms are
    what `terms_of_all` gives it, for a cold analyzer and for a warm one."""
    cold, warm = Analyzer(), Analyzer()
    one_by_one = [warm.terms_of_all(texts) for texts in groups]
    assert cold.terms_of_each(groups) == one_by_one
    assert warm.terms_of_each(groups) == one_by_one


@given(st.text())
def test_a_lower_case_word_is_its_own_one_term(text: str) -> None:
    """`abstain.unmatched_words` takes a lower-case word's stem as its terms without `terms`'
    regexes: the same terms."""
    for word, _, _ in ANALYZER.words(text):
        if word.isalpha() and word.islower():
            stem = ANALYZER.stem(word)
            assert ANALYZER.terms(word) == ([stem] if stem else [])
