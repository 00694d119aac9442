"""The tiers' own promises: a missing optional module names its extra, and that extra exists."""

from __future__ import annotations

import tomllib
from pathlib import Path

import _tiers

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())


def test_a_missing_optional_module_names_the_extra_that_brings_it() -> None:
    hint = _tiers.missing_extra(ModuleNotFoundError(name="reportlab.lib.pagesizes"))
    assert hint == ("the module 'reportlab' is missing: it comes with byref's 'pdf' extra, which "
                    "`make check` and `make test` install (pip install -e '.[dev]')")
    assert _tiers.missing_extra(ModuleNotFoundError(name="no_such_thing")) is None
    assert _tiers.missing_extra(ValueError("reportlab")) is None


def test_every_named_extra_is_declared_and_dev_brings_it() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    dev = " ".join(extras["dev"])
    for module, extra in _tiers.EXTRAS.items():
        assert extra in extras, f"{module!r} names the extra {extra!r}, which pyproject lacks"
        assert extra == "dev" or extra in dev, f"the dev extra does not bring {extra!r}"


def test_the_fast_tier_draws_fewer_examples_and_never_none() -> None:
    assert _tiers.examples(300) in (300, 60)
    assert _tiers.examples(8) == 8
