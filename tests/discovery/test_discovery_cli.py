"""`byref tools search|stats` output shapes, and the `bench search` registration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from byref.cli import main
from byref.cli.bench.search import register_bench

ROW_KEYS = {"server", "tool", "name", "score", "excerpt"}


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    (tmp_path / "files.json").write_text(json.dumps({"server": "files", "tools": [
        {"name": "read_pdf", "description": "Read the text of a PDF file.",
         "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"name": "write_file", "description": "Write bytes to a file."},
    ]}), encoding="utf-8")
    (tmp_path / "boards.json").write_text(json.dumps([
        {"name": "list_boards", "description": "List the boards of a workspace."},
    ]), encoding="utf-8")
    return tmp_path


def test_search_json_shape(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "search", str(catalog), "read a pdf", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"query", "results"} and out["query"] == "read a pdf"
    assert out["results"][0] == {"server": "files", "tool": "read_pdf", "name": "read_pdf",
                                 "score": out["results"][0]["score"],
                                 "excerpt": "Read the text of a PDF file."}
    assert all(set(r) == ROW_KEYS for r in out["results"])
    assert isinstance(out["results"][0]["score"], float)


def test_queries_file_prints_one_object_per_line_in_order(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text('list boards\n\n{"query": "write a file"}\nread pdf\n', encoding="utf-8")
    assert main(["tools", "search", str(catalog), "--queries", str(queries), "--json",
                 "--limit", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["query"] for line in lines] == ["list boards", "write a file", "read pdf"]
    assert [line["results"][0]["name"] for line in lines] == ["list_boards", "write_file",
                                                              "read_pdf"]
    assert all(len(line["results"]) == 1 for line in lines)


def test_filters_and_their_refusal(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "search", str(catalog), "list", "--capability", "boards",
                 "--json"]) == 0
    assert [r["server"] for r in json.loads(capsys.readouterr().out)["results"]] == ["boards"]
    assert main(["tools", "search", str(catalog), "x", "--capability", "bords"]) == 2
    assert "did you mean 'boards'?" in capsys.readouterr().err


def test_query_and_queries_are_exclusive(catalog: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "search", str(catalog)]) == 2
    assert "exactly one" in capsys.readouterr().err


def test_stats_json_shape(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "stats", str(catalog), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"tools", "capability_roots", "turn1_chars", "working_set_chars",
                        "working_set_largest_chars", "working_set_plain_chars",
                        "all_declared_chars",
                        "median_declaration_chars", "budget"}
    assert out["tools"] == 3 and out["budget"] == 8
    assert out["turn1_chars"] < out["working_set_chars"] <= out["working_set_largest_chars"]


def test_bench_search_registers_a_runnable_subcommand() -> None:
    parser = argparse.ArgumentParser()
    register_bench(parser.add_subparsers(dest="bench_command"))
    args = parser.parse_args(["search", "--json", "--no-hybrid"])
    assert callable(args.run) and args.json and args.no_hybrid


def test_bench_search_reports_missing_data(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    register_bench(parser.add_subparsers(dest="bench_command"))
    args = parser.parse_args(["search", "--eval", str(tmp_path), "--no-hybrid"])
    assert args.run(args) == 2
    assert "Benchmark data not found" in capsys.readouterr().err


def test_usage_from_transcripts_then_search_with_it(
    catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from byref.transcript import Part, Transcript

    saved = tmp_path / "session.jsonl"
    transcript = Transcript(saved)
    for n, query in enumerate(("scan a brochure", "brochure text", "text of my brochure")):
        page = {"query": query, "results": [{"name": "read_pdf", "description": "…"}]}
        for call_id, tool, args, result in ((f"s{n}", "search_tools", {"query": query}, page),
                                            (f"a{n}", "activate_tool", {"names": ["read_pdf"]},
                                             {"activated": ["read_pdf"]})):
            transcript.append("assistant", [Part(type="tool_call", tool=tool, call_id=call_id,
                                                 value={"name": tool, "id": call_id,
                                                        "input": args})])
            transcript.append("tool", [Part(type="tool_result", tool=tool, call_id=call_id,
                                            value=result)])
    assert main(["tools", "usage", str(saved)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"query": q, "tool": "read_pdf"}
        for q in ("scan a brochure", "brochure text", "text of my brochure")]
    usage = tmp_path / "usage.jsonl"
    retired = [json.dumps({"query": f"old thing {n}", "tool": "retired_tool"}) for n in range(3)]
    usage.write_text("\n".join(lines + retired) + "\n", "utf-8")
    assert main(["tools", "search", str(catalog), "brochure", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == []
    assert main(["tools", "search", str(catalog), "brochure", "--json",
                 "--usage", str(usage)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["results"][0]["name"] == "read_pdf"
    assert "usage names 1 tool(s) not in the catalog, ignored: 'retired_tool'" in captured.err


def test_usage_refuses_a_missing_transcript(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["tools", "usage", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"byref tools usage: no transcript file at {str(missing)!r}.\n")


def test_bench_search_prints_every_retrieval_section(capsys: pytest.CaptureFixture[str]) -> None:
    from byref.cli.bench.search import _retrieval

    m = {"recall@1": 0.5, "recall@5": 0.75}
    splits = {"A": m, "B": m, "task": m, "vocabulary": m}
    queries = {"queries": 3, "lexical": m, "lexical_without_near_words": m, "hybrid": m}
    _retrieval({"dev_rows": {"A": 2000, "B": 2000},
                "fusion": {"by_weight": {"0.3": {"A": m, "B": m}}, "chosen_on": "A",
                           "chosen": 0.3},
                "rerank": {"none": {"A": m, "B": m}},
                "near_words": {"near_words": splits, "without": splits},
                "density": {"0.0": splits}, "description_share": {"0.5": splits},
                "name_share": {"0.2": splits},
                "encode_1_thread": {"p50_ms": 3.0, "p95_ms": 5.0},
                "task_queries": queries, "vocabulary_queries": queries,
                "install": {"extra_mb": 219.6, "core_mb": 27.0, "largest": "onnxruntime"}},
               reference_ms=1.0)
    out = capsys.readouterr().out
    assert "Near words (the packaged model's nearest words), lexical" in out
    assert "  near_words  A r@1 0.500 r@5 0.750" in out
    assert "Name share of a document vector, hybrid" in out
    assert "   0.2  A r@1 0.500 r@5 0.750  B r@1 0.500" in out
    assert "lexical_without_near_words" in out and "<- chosen on A" in out


def test_a_search_no_tool_fits_prints_no_rows_and_what_to_try(
        catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "search", str(catalog), "water the roses in the greenhouse",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "query": "water the roses in the greenhouse", "results": [],
        "unmatched": ["water", "roses", "greenhouse"], "abstained": True}
    assert main(["tools", "search", str(catalog), "water the roses in the greenhouse"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "  No tool fits this need. No tool mentions 'water', 'roses', 'greenhouse'. Try other "
        "words or a capability root (boards, files).")
    assert main(["tools", "search", str(catalog), "read the rose pdf", "--json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert page["results"][0]["name"] == "read_pdf" and page["unmatched"] == ["rose"]


def test_an_encoder_that_cannot_be_found_is_refused(
        catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime", reason="hybrid search needs byref[embeddings]")
    assert main(["tools", "search", str(catalog), "read a pdf", "--hybrid", "--encoder",
                 "no-such-encoder-pkg"]) == 2
    assert "No encoder 'no-such-encoder-pkg': it is neither a file" in capsys.readouterr().err
