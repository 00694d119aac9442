"""The vocabulary layer: synonym groups with phrases (stop words count inside a phrase), and
search_tools' `also`, other phrasings of one need fused into one menu."""

from __future__ import annotations

from helpers_discovery import make_tool

from byref.discovery import Catalog, Searcher
from byref.discovery.declaring.scaffold import SEARCH_DESCRIPTION, SEARCH_SCHEMA, discovery_tools
from byref.discovery.lexical.index import SearchIndex


def shop() -> Catalog:
    return Catalog([
        make_tool("create_refund", "Refund a payment intent."),
        make_tool("convert_currency", "Convert an amount of money between currencies."),
        make_tool("restart_app", "Restart the app's processes."),
        make_tool("list_apps", "List the apps of the account."),
    ])


def names(index: SearchIndex, query: str) -> list[str]:
    return [h.entry.name for h in index.search(query, limit=5).hits]


def test_a_phrase_in_the_query_searches_its_group() -> None:
    cat = shop()
    query = "give the customer their money back"
    assert "create_refund" in names(cat.index(), query)  # synonyms.txt: money_back → refund
    assert "create_refund" not in names(cat.index(synonyms=()), query)
    # The phrase's words apart are not the phrase: "money" alone does not mean refund.
    assert "create_refund" not in names(cat.index(), "how much money is that in yen")
    assert "create_refund" not in names(cat.index(), "back up the money records")


def test_stop_words_count_inside_a_phrase() -> None:
    cat = Catalog([make_tool("reboot_service", "Reboot a service."),
                   make_tool("list_apps", "List the apps of the account.")])
    index = cat.index(synonyms=["reboot off_and_on"])
    assert names(index, "turn it off and on again") == ["reboot_service"]
    assert names(cat.index(synonyms=()), "turn it off and on again") == []
    assert index.related_terms("switch it on and off", ("switch",)) == []  # the order counts


def test_a_phrase_alone_is_never_searched_for_itself() -> None:
    index = shop().index(synonyms=["refund money_back"])
    assert index.related_terms("refund it", ("refund",)) == []  # no terms "money", "back"


def test_other_phrasings_are_fused_into_one_menu() -> None:
    searcher = Searcher(shop())
    assert [r.name for r in searcher.search("reverse that", limit=2).results] == []
    page = searcher.search("reverse that", also=["refund payment"], limit=2)
    assert [r.name for r in page.results] == ["create_refund"]
    assert page.query == "reverse that"
    # A tool two phrasings find ranks above a tool one of them finds.
    both = searcher.search("restart app", also=["restart processes"], limit=3)
    assert both.results[0].name == "restart_app"
    # An exact name in any phrasing is first.
    exact = searcher.search("apps of the account", also=["create_refund"], limit=3)
    assert exact.results[0].name == "create_refund"


def test_search_tools_takes_also_and_says_what_it_is_for() -> None:
    search_tools, _ = discovery_tools(Searcher(shop()))
    out = search_tools.fn(query="reverse that", also=["refund payment"])
    assert [row["name"] for row in out["results"]] == ["create_refund"]
    assert SEARCH_SCHEMA["properties"]["also"] == {"type": "array", "items": {"type": "string"}}
    assert "`also`" in SEARCH_DESCRIPTION and "refund" in SEARCH_DESCRIPTION
