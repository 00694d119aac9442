"""Seed 004's decisive-tail cases, read through the real harness and `read_result`."""

from __future__ import annotations

from typing import Any

from helpers_reads import keeping_tool, lines_tool, scripted_reads

from byref.jsonview import encode
from byref.reads import ReadLimits


def records(n: int) -> list[dict[str, Any]]:
    """`n` records; the last five carry the decisive facts (the tail a silent cut would lose)."""
    return [{"id": f"R{i:02d}", "holding": f"fund {i}",
             "flag": "decisive" if i > n - 5 else "routine"} for i in range(1, n + 1)]


def test_65_records_with_a_60_entry_limit_name_the_5_missing() -> None:
    source = keeping_tool(records(65), id_field="id")
    (answer, rest), _ = scripted_reads(source, [{}, {"offset": 60}],
                                       limits=ReadLimits(explicit_read_entries=60))
    assert answer["coverage"] == {
        "requested": 65, "loaded": 60, "total": 65, "range": [0, 60], "hasMore": True,
        "byteComplete": True, "filteredCount": 0, "inputComplete": False,
        "reason": "entry_limit", "reasons": ["entry_limit", "page"],
        "missingIds": ["R61", "R62", "R63", "R64", "R65"], "missingIdCount": 5,
    }
    assert [r["flag"] for r in answer["records"]] == ["routine"] * 60
    assert answer["note"] == (
        "Partial read: records 0–59 of 65 (60 delivered of 65 requested). Stopped at the "
        "explicit-read limit of 60 records per read. Missing ids (5): R61, R62, R63, R64, R65. "
        "5 records from position 60 were not read: call read_result again with offset=60. Do "
        "not describe this read as the whole result."
    )
    # The tail is readable: the next read delivers exactly the decisive five.
    assert [r["id"] for r in rest["records"]] == ["R61", "R62", "R63", "R64", "R65"]
    assert rest["coverage"]["inputComplete"] is True and rest["coverage"]["hasMore"] is False


def test_a_byte_budget_that_cuts_record_20_delivers_19_whole_records() -> None:
    source_records = [{"id": f"R{i:02d}", "text": "x" * 100} for i in range(1, 41)]
    size = len(encode(source_records[0]))
    nineteen = len(encode(source_records[:19]))
    budget = nineteen + 1 + size // 2  # record 20 would end halfway past the budget
    (answer,), _ = scripted_reads(keeping_tool(source_records, id_field="id"),
                                  [{"max_bytes": budget}])
    coverage = answer["coverage"]
    assert (coverage["loaded"], coverage["byteComplete"], coverage["reason"]) == (
        19, False, "byte_limit")
    assert coverage["inputComplete"] is False and coverage["range"] == [0, 19]
    assert answer["records"] == source_records[:19]  # whole records, none cut
    assert len(encode(answer["records"])) <= budget
    assert coverage["missingIds"][0] == "R20" and coverage["missingIdCount"] == 21
    assert answer["byteBudget"] == {"bytes": budget, "limitedBy": "max_bytes"}
    assert "Stopped before position 19 to stay within" in answer["note"]


def test_a_parse_failure_is_counted_with_its_gap() -> None:
    lines = [encode({"id": f"R{i:02d}", "amount": i}) for i in range(1, 31)]
    for i in (10, 11, 12):
        lines[i] = lines[i][:12]  # torn lines 11-13: not JSON
    (answer,), _ = scripted_reads(lines_tool(b"\n".join(lines) + b"\n"), [{}])
    coverage = answer["coverage"]
    assert coverage == {
        "requested": 30, "loaded": 27, "total": 30, "range": [0, 30], "hasMore": False,
        "byteComplete": True, "filteredCount": 3, "inputComplete": False,
        "reason": "parse_error", "gaps": [{"start": 10, "end": 13, "reason": "parse_error"}],
    }
    assert [r["id"] for r in answer["records"]][9:11] == ["R10", "R14"]
    assert "3 records in the range could not be used (parse_error)" in answer["note"]


def test_equal_counts_with_ids_a_b_c_d_d_report_an_identity_mismatch() -> None:
    value = [{"id": i} for i in ("A", "B", "C", "D", "D")]
    source = keeping_tool(value, id_field="id", expected_ids=["A", "B", "C", "D", "E"])
    (answer,), _ = scripted_reads(source, [{}])
    coverage = answer["coverage"]
    assert (coverage["requested"], coverage["loaded"], coverage["total"]) == (5, 5, 5)
    assert coverage["inputComplete"] is False
    assert coverage["reason"] == "identity_mismatch"
    assert coverage["duplicateIds"] == ["D"]
    assert coverage["missingIds"] == ["E"]
    assert "Identity mismatch: ids delivered more than once: D" in answer["note"]
