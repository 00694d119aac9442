"""The excerpt lens with seed 001's constants, and the water-filled page budget."""

from __future__ import annotations

from helpers_discovery import make_tool

from byref.discovery import Catalog, Filters, Searcher, excerpt, water_fill
from byref.discovery.page.excerpts import EXCERPT_MAX, JOIN, LEAD, TAIL, cover, windows

# The seed's figure: a 426-character description, three "file" hits near the start and one
# "Excel" far from them.
SPREADSHEET = (
    "Read a spreadsheet file and turn each sheet file-by-file into structured records. Handles "
    "column headers, merged cells, dates and formulas; rows with errors are collected instead "
    "of aborting. Requires the openpyxl engine for native Excel workbooks; legacy binary "
    "formats are converted first. Returns one JSON array per sheet with typed values and a "
    "summary of skipped rows, so a caller can decide whether to retry them in one."
)
WEIGHTS = {"excel": 1.69, "file": 1.00}


def test_the_description_is_the_seeds() -> None:
    assert len(SPREADSHEET) == 426
    found = windows(SPREADSHEET, ["excel", "file"])
    assert [sorted(w.terms) for w in found] == [["file"], ["excel"]]
    assert found[0].span <= 120


def test_rare_term_earns_more_context_than_three_common_hits() -> None:
    text = excerpt(SPREADSHEET, ["excel", "file"], WEIGHTS)
    assert len(text) <= EXCERPT_MAX
    file_window, excel_window = text.rstrip("…").split(JOIN)
    assert file_window.count("file") == 3 and "Excel" in excel_window
    assert len(excel_window) > len(file_window)
    # The seed's figure: 105 characters around the "file" hits (clamped at the start of the
    # text) and 160 around "Excel".
    assert len(file_window) == 105
    # Less the half word it would end in; it opens at its sentence (issue 39.D).
    assert 160 - 12 <= len(excel_window) <= 162
    assert excel_window.startswith("Requires the openpyxl engine")


def test_weights_decide_the_split() -> None:
    flipped = excerpt(SPREADSHEET, ["excel", "file"], {"excel": 1.0, "file": 3.0})
    file_window, excel_window = flipped.rstrip("…").split(JOIN)
    assert len(file_window) > 105 or len(excel_window) < 150


def test_through_the_search_pipeline() -> None:
    catalog = Catalog([
        make_tool("excel_reader", SPREADSHEET, capabilities=("file:read",)),
        make_tool("text_reader", "Read a text file", capabilities=("file:read",)),
        make_tool("pdf_reader", "Read a PDF file", capabilities=("file:read",)),
    ])
    page = Searcher(catalog).search("excel file", filters=Filters(("file",)))
    assert [r.name for r in page.results] == ["excel_reader", "text_reader", "pdf_reader"]
    assert page.results[0].excerpt == excerpt(SPREADSHEET, ["excel", "file"],
                                              catalog.index().search(
                                                  "excel file", filters=Filters(("file",))
                                              ).weights)
    assert page.results[1].excerpt == "Read a text file"


def test_greedy_cover_prefers_one_window_explaining_both_terms() -> None:
    text = ("alpha " * 30) + "excel file here. " + ("beta " * 30) + "excel again " + ("x " * 40)
    chosen = cover(windows(text, ["excel", "file"]), WEIGHTS)
    assert len(chosen) == 1 and chosen[0].terms == {"excel", "file"}


def test_short_text_is_shown_whole_and_no_hits_shows_the_opening() -> None:
    assert excerpt("Widget lookup.", ["x"], {}) == "Widget lookup."
    long = "Opening words. " + "filler " * 80
    shown = excerpt(long, ["absent"], {}, 100)
    assert shown.startswith("Opening words.") and shown.endswith("…") and len(shown) <= 100


def test_a_name_hit_is_prefixed() -> None:
    catalog = Catalog([
        make_tool("archive_work_item", "Moves the record to cold storage so it stops showing "
                  "on boards and in reports."),
        make_tool("list_boards", "List boards."),
    ])
    result = Searcher(catalog).search("archive").results[0]
    assert result.excerpt.startswith("Tool name: archive work item. Moves the record")


def test_water_fill_lets_short_entries_donate() -> None:
    assert water_fill([14, 1000, 1000], 500) == [14, 243, 243]
    assert water_fill([1000], 1500) == [EXCERPT_MAX]
    assert water_fill([50, 60, 70], 1500) == [50, 60, 70]
    assert sum(water_fill([400] * 8, 1500)) <= 1500


def test_page_budget_is_shared() -> None:
    tools = [make_tool(f"tool_{i}", "alpha " + "words " * 200) for i in range(10)]
    page = Searcher(Catalog(tools), page_chars=1_000).search("alpha", limit=10)
    assert len(page.results) == 10
    assert sum(len(r.excerpt) for r in page.results) <= 1_000
    assert all(len(r.excerpt) <= 100 for r in page.results)


# The filesystem server's get_file_info, verbatim (issue 39.D: its row read "… ype. This tool").
FILE_INFO = (
    "Retrieve detailed metadata about a file or directory. Returns comprehensive information "
    "including size, creation time, last modified time, permissions, and type. This tool is "
    "perfect for understanding file characteristics without reading the actual content. Only "
    "works within allowed directories."
)


def test_an_excerpt_opens_at_its_sentence_when_its_context_reaches_it() -> None:
    text = excerpt(FILE_INFO, ["read"], {"read": 1.0}, 140)
    assert text.startswith("… This tool is perfect") and "reading" in text, text
    assert len(text) <= 140


def test_no_window_opens_or_ends_in_half_a_word() -> None:
    words = set(FILE_INFO.replace(".", " ").replace(",", " ").split())
    for budget in range(40, len(FILE_INFO), 7):
        for terms in (["read"], ["size"], ["directories"], ["metadata", "allowed"], ["json"]):
            text = excerpt(FILE_INFO, terms, {}, budget)
            assert len(text) <= budget
            for piece in text.removeprefix(LEAD).removesuffix(TAIL).split(JOIN):
                first, last = piece.split()[0], piece.split()[-1]
                assert first.strip(".,") in words and last.strip(".,") in words, (budget, text)
