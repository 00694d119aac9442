"""Properties of the lens's small parsers and its pager, and a run whose data is gone."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from _lens_rig import DemoRun
from hypothesis import given
from hypothesis import strategies as st

from byref.lens import Lens, load_run
from byref.lens.pages.paged import PAGE_ROWS, paged_table
from byref.lens.reading.run import parse_scope
from byref.store import Scope

NAMES = st.text(st.characters(blacklist_characters="/", blacklist_categories=["Cs"]),
                min_size=1, max_size=12)


@given(NAMES, NAMES, NAMES)
def test_a_scope_as_events_write_it_parses_back(tenant: str, principal: str, conv: str) -> None:
    scope = Scope(tenant, principal, conv)
    assert parse_scope(str(scope)) == scope


@given(st.text(max_size=40))
def test_anything_else_is_not_a_scope_or_is_one_exactly(text: str) -> None:
    parsed = parse_scope(text)
    assert parsed is None or str(parsed) == text


@given(st.lists(st.one_of(st.integers(), st.dictionaries(st.sampled_from("abc"), st.integers())),
                max_size=3 * PAGE_ROWS + 7))
def test_the_pages_together_hold_every_item_once_in_order(items: list[object]) -> None:
    seen: list[int] = []
    pages = max(1, -(-len(items) // PAGE_ROWS))
    for number in range(1, pages + 1):
        body = paged_table(iter(items), number, "/x?")
        seen += [int(n) for n in re.findall(r'data-row="(\d+)"', body)]
        assert f'data-figure="rows-total" data-value="{len(items)}"' in body
        assert ('id="next-page"' in body) == (number < pages)
    assert seen == list(range(len(items)))


def test_a_run_whose_store_is_gone_still_draws(demo_run: DemoRun, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(demo_run.out, copy, ignore=shutil.ignore_patterns("store", "export.json"))
    (copy / "store").mkdir()  # an empty store: every artifact has expired
    lens = Lens(load_run(copy))
    page = lens.respond("GET", "/")
    body = page.body.decode()
    assert page.status == 200 and "counted as 0" in body and "is absent" in body
    shown = dict(re.findall(r'data-figure="([^"]+)" data-value="(\d+)"', body))
    assert int(shown["model_read_chars"]) == demo_run.report["byref"]["model_read_chars"]
    result = lens.respond("GET", "/result/4/0").body.decode()
    assert "is not available" in result or "absent" in result
