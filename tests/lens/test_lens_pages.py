"""The lens's pages, fetched over HTTP from the standard library's server, for real runs."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _lens_rig import HOSTILE, MISSING, SCOPE, DemoRun, make_kinds_run

from _waits import scaled
from byref.demo.data import open_rows
from byref.lens import Lens, RunDirectoryError, load_run
from byref.lens.pages.paged import PAGE_ROWS


def fetch(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=scaled(60)) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def figures(body: str) -> dict[str, int]:
    return {name: int(value) for name, value in
            re.findall(r'data-figure="([^"]+)" data-value="(\d+)"', body)}


def text_of(body: str) -> str:
    body = re.sub(r"<style>.*?</style>", "", body, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("lens-kinds") / "run"
    return out, make_kinds_run(out)


def test_the_totals_are_the_demo_ledger(demo_run: DemoRun, served: Any) -> None:
    url = served(Lens(load_run(demo_run.out)))
    status, kind, body = fetch(url)
    assert status == 200 and kind.startswith("text/html")
    shown, ledger = figures(body.decode()), demo_run.report["byref"]
    for name in ("model_read_chars", "model_read_tokens", "model_written_chars",
                 "model_written_tokens"):
        assert shown[name] == ledger[name], name
    # The naive side is the run's own, as `byref demo` printed it (issue 25.9: the page said
    # 830× where the command said 427.4×), and says how it was obtained.
    naive = demo_run.report["naive"]
    assert shown["naive_read_chars"] == naive["model_read_chars"]
    assert shown["naive_written_chars"] == naive["model_written_chars"]
    totals = text_of(body.decode().split('id="totals"')[1].split("</table>")[0])
    assert f"({demo_run.report['ratio_read']:,.1f}× what the model read here)" in totals
    assert f"({demo_run.report['ratio_written']:,.1f}×)" in totals
    assert "measured: the naive harness ran the same task" in totals
    # The estimate is named as one, read side only; what was kept out is the rest of it.
    assert "refs inlined (estimate)" in totals and "is not the naive run" in totals
    assert shown["inlined_read_chars"] >= demo_run.report["export_bytes"]
    assert shown["kept_chars"] == shown["inlined_read_chars"] - shown["model_read_chars"]
    assert shown["passed_refs"] == 2  # the export's Blob to query_json, its rows to the PDF
    assert "inlining everything" not in totals and "830" not in totals


def test_a_record_without_a_naive_run_says_what_its_estimate_means(
        kinds: tuple[Path, dict[str, Any]]) -> None:
    out, _ = kinds
    body = Lens(load_run(out)).respond("GET", "/").body.decode()
    totals = text_of(body.split('id="totals"')[1].split("</table>")[0])
    assert "naive harness, same task" not in totals
    assert "has no naive run to compare with" in totals
    assert "not what another harness would have spent" in totals


def test_provenance_of_each_ref(demo_lens: Lens) -> None:
    body = demo_lens.respond("GET", "/").body.decode()
    calls = dict(re.findall(r'id="call-(call_\d)" data-tool="([^"]+)"', body))
    assert calls == {"call_1": "export_work_items", "call_2": "query_json",
                     "call_3": "generate_pdf"}
    text = text_of(body)
    # query_json took the export's Blob, returned by export_work_items at seq 2 part 0 …
    assert "input.source" in text and "result of export_work_items (call_1), seq 2 part 0" in text
    # … generate_pdf took a Message ref to the query's result, which went to call_3.
    assert "result of query_json (call_2), seq 4 part 0 field 'value'" in text
    section = body.split('id="call-call_2"')[1].split('id="call-call_3"')[0]
    assert 'href="#call-call_3"' in section
    assert "<details class=request>" in body  # the request, expandable


def test_the_query_result_pages_through_all_148_rows(demo_run: DemoRun, demo_lens: Lens) -> None:
    ids: list[str] = []
    target: str | None = "/result/4/0"
    pages = 0
    while target:
        body = demo_lens.respond("GET", target).body.decode()
        ids += re.findall(r"<td>(WI-\d+)</td>", body)
        pages += 1
        nxt = re.search(r'href="([^"]+)" id="next-page"', body)
        target = html.unescape(nxt.group(1)) if nxt else None
    expected = [r["id"] for r in open_rows(demo_run.out / "export.json")]
    assert ids == expected and len(ids) == 148 and pages == -(-148 // PAGE_ROWS)


def test_artifacts_render_by_kind(kinds: tuple[Path, dict[str, Any]], served: Any) -> None:
    out, refs = kinds
    url = served(Lens(load_run(out)))
    _, _, image_page = fetch(f"{url}artifact/{refs['snapshot']}")
    assert f'src="/artifact/{refs["snapshot"]}/raw"' in image_page.decode()
    status, kind, raw = fetch(f"{url}artifact/{refs['snapshot']}/raw")
    assert (status, kind) == (200, "image/png") and raw.startswith(b"\x89PNG")
    _, _, log = fetch(f"{url}artifact/{refs['server_log']}")
    assert 'class="lines"' in log.decode() and log.decode().count("<span>line ") == 40
    _, _, dump = fetch(f"{url}artifact/{refs['core_dump']}")
    assert "no renderer for mediaType 'application/x-core'" in text_of(dump.decode())
    assert 'id="lineage"' in dump.decode()
    status, _, _ = fetch(f"{url}artifact/{refs['core_dump']}/raw")
    assert status == 404  # only raster images are served raw
    _, _, users = fetch(f"{url}artifact/{refs['users']}?page=3")
    assert re.findall(r'data-row="(\d+)"', users.decode()) == [str(i) for i in range(100, 120)]


def test_search_refusals_and_coverage_are_shown(kinds: tuple[Path, dict[str, Any]]) -> None:
    out, _ = kinds
    body = Lens(load_run(out)).respond("GET", "/").body.decode()
    search = body.split('id="search-events"')[1].split("</table>")[0]
    assert "searched" in search and "archive a paid invoice" in search and "activated" in search
    refusals = text_of(body.split('id="refusals"')[1].split("</table>")[0])
    assert "invalid-input" in refusals and "missing-or-expired" in refusals
    assert MISSING in refusals and "is not available" in refusals  # what the model was told
    coverage = text_of(body.split('id="coverage"')[1].split("</table>")[0])
    assert "read_result" in coverage and '"hasMore"' not in coverage
    assert "hasMore : true" in coverage and "total : 120" in coverage


def test_tool_output_never_becomes_markup(kinds: tuple[Path, dict[str, Any]]) -> None:
    out, refs = kinds
    lens = Lens(load_run(out))
    for target in ("/", f"/artifact/{refs['server_log']}", f"/artifact/{refs['users']}",
                   "/result/18/0"):
        response = lens.respond("GET", target)
        assert HOSTILE not in response.body.decode() and "<script" not in response.body.decode()
        assert "script-src" not in response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]


def test_absent_artifacts_and_other_scopes(kinds: tuple[Path, dict[str, Any]]) -> None:
    out, refs = kinds
    from byref.store import Scope

    mine = Lens(load_run(out))
    assert mine.respond("GET", f"/artifact/{MISSING}").status == 404
    assert "absent" in text_of(mine.respond("GET", f"/artifact/{MISSING}").body.decode())
    theirs = Lens(load_run(out, scopes=[Scope("acme", "mallory", "kinds")]))
    page = theirs.respond("GET", f"/artifact/{refs['users']}")
    assert page.status == 404 and b"user 1" not in page.body
    assert mine.respond("GET", f"/artifact/{refs['users']}").status == 200
    assert str(SCOPE) in mine.respond("GET", f"/artifact/{refs['users']}").body.decode()


def test_a_path_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunDirectoryError, match=r"has no transcript.jsonl"):
        load_run(tmp_path)
    with pytest.raises(RunDirectoryError, match=r"is not a directory"):
        load_run(tmp_path / "nope")
    (tmp_path / "transcript.jsonl").write_text("")
    body = Lens(load_run(tmp_path)).respond("GET", "/").body.decode()
    assert "No trace.jsonl" in text_of(body) and "No store/ directory" in text_of(body)
    assert "No tool calls in this run." in text_of(body)


def test_lineage_names_the_parents_an_artifact_was_made_from(
        kinds: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    import shutil

    from byref.store import FileStore, PutOptions

    src, refs = kinds
    out = tmp_path / "run"
    shutil.copytree(src, out)
    store = FileStore(out / "store")
    child = store.put(SCOPE, b"u0,u1\n", PutOptions(kind="users/csv", media_type="text/csv",
                                                     parent_refs=(refs["users"], MISSING))).ref
    lens = Lens(load_run(out))
    lineage = lens.respond("GET", f"/artifact/{child}").body.decode().split('id="lineage"')[1]
    lineage = lineage.split("</div>")[0]
    assert f'href="/artifact/{refs["users"]}"' in lineage and "users/json" in lineage
    assert MISSING in lineage and "(absent)" in lineage
