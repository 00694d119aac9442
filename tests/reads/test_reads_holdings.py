"""A 120-row holdings table read in pages of 50: exact ranges, `hasMore`, never "complete"."""

from __future__ import annotations

from typing import Any

from helpers_reads import keeping_tool, scripted_reads

from byref.reads import ResultCatalog
from byref.store import PutOptions

FIELDS = ["fundCode", "amount", "sector"]


def holdings() -> list[dict[str, Any]]:
    return [{"fundCode": f"F{i:03d}", "name": f"Fund {i}", "amount": 1000 + i,
             "sector": ("technology", "energy", "health")[i % 3]} for i in range(120)]


def test_pages_of_50_report_exact_ranges_and_are_never_described_as_complete() -> None:
    pages = [{"fields": FIELDS, "offset": o, "limit": 50} for o in (0, 50, 100)]
    answers, h = scripted_reads(keeping_tool(holdings(), id_field="fundCode"), pages)
    facts = [(a["coverage"]["range"], a["coverage"]["loaded"], a["coverage"]["hasMore"],
              a["coverage"]["inputComplete"], a["coverage"]["reason"]) for a in answers]
    assert facts == [([0, 50], 50, True, True, "page"), ([50, 100], 50, True, True, "page"),
                     ([100, 120], 20, False, True, "page")]
    assert answers[0]["note"] == (
        "Partial read: records 0–49 of 120 (50 delivered of 50 requested). 70 records from "
        "position 50 were not read: call read_result again with offset=50. Do not describe "
        "this read as the whole result."
    )
    for answer in answers:
        assert "Complete" not in answer["note"]
        assert "Do not describe this read as the whole result." in answer["note"]
        assert all(set(r) == set(FIELDS) for r in answer["records"])
    codes = [r["fundCode"] for a in answers for r in a["records"]]
    assert codes == [f"F{i:03d}" for i in range(120)]
    # The catalog says the table exists (and its shape); it does not say it was read.
    assert h.store is not None
    (entry,) = ResultCatalog(h.store, h.scope).entries()
    assert (entry.row_count, entry.fields, entry.kind) == (
        120, ("fundCode", "name", "amount", "sector"), "result/fetch_records")
    assert "not that you have read it" in ResultCatalog(h.store, h.scope).render(2_000)


def test_one_read_of_all_120_rows_is_the_only_complete_one() -> None:
    (answer,), _ = scripted_reads(keeping_tool(holdings(), id_field="fundCode"), [{}])
    assert answer["coverage"]["reason"] is None and answer["coverage"]["hasMore"] is False
    assert answer["note"] == "Complete: all 120 records of this result were delivered."


def test_the_catalog_is_fitted_to_its_budget_and_says_what_it_left_out() -> None:
    _, h = scripted_reads(keeping_tool(holdings()), [{"limit": 1}])
    assert h.store is not None
    for i in range(5):
        h.store.put(h.scope, b"x" * 10, PutOptions(kind="export/raw", label=f"export {i}"))
    text = ResultCatalog(h.store, h.scope).render(450)
    assert len(text.encode()) <= 450
    assert text.endswith("more results not listed.")
