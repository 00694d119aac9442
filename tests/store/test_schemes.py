"""The store scheme registry: a package's adapter joins through a real `byref.stores` entry
point (a dist-info on sys.path, as pip installs one), opens by URL, and runs the battery; an
unknown scheme is an unknown URL everywhere, the CLI's `store check` included."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import byref
from byref.cli import main
from byref.store import MemoryStore, StoreURLError, open_store
from byref.store.conformance import harness_for_url, run_conformance
from byref.store.schemes import StoreScheme, find_scheme, register_scheme

ADAPTER = '''
from byref.store import MemoryStore
from byref.store.schemes import StoreScheme

def open_vault(u):
    label = u.query.pop("label", "")
    u.no_more()
    store = MemoryStore(**u.common)
    store.label = label
    return store

SCHEME = StoreScheme("vault://NAME", open_vault)
'''


@pytest.fixture
def vault_package(tmp_path: Path) -> Iterator[None]:
    """An installed third-party adapter: its module and its dist-info's entry point."""
    (tmp_path / "byref_vault_demo.py").write_text(ADAPTER)
    info = tmp_path / "byref_vault_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: byref-vault-demo\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[byref.stores]\nvault = byref_vault_demo:SCHEME\n")
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("byref_vault_demo", None)
        from byref.store import schemes

        schemes._registered.pop("vault", None)


def test_an_entry_point_adapter_opens_by_url_and_passes_the_battery(vault_package: None) -> None:
    store = open_store("vault://main?label=blue&ttl=60")
    assert isinstance(store, MemoryStore) and store.label == "blue"  # type: ignore[attr-defined]
    assert store.retention is not None and store.retention.ttl == 60
    with pytest.raises(StoreURLError, match="options this adapter does not know: colour"):
        open_store("vault://main?colour=red")
    report = run_conformance(harness_for_url("vault://x"))
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes["round-trip"] == outcomes["one-absence"] == "passed"
    # No damage module: the damage cases say a hook is missing instead of passing silently.
    assert outcomes["corrupt-refused-by-get"] == "failed"
    assert "corrupt" in next(r.detail for r in report.results
                             if r.name == "corrupt-refused-by-get")
    # Once loaded, the scheme is listed among the accepted forms of an unknown URL.
    with pytest.raises(StoreURLError, match=r"s3://bucket/prefix, vault://NAME \(for example"):
        open_store("ftp://x")


def test_an_unknown_scheme_is_an_unknown_store_url_for_the_battery_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert find_scheme("gcs") is None
    with pytest.raises(StoreURLError, match="Unknown store URL 'gcs://x'; use one of:"):
        harness_for_url("gcs://x")
    assert main(["store", "check", "gcs://x"]) == 2
    assert capsys.readouterr().err.startswith("error: Unknown store URL 'gcs://x'; use one of:")


def test_registering_at_run_time_and_its_mistakes() -> None:
    register_scheme("scratch", StoreScheme("scratch://", lambda u: MemoryStore(**u.common)))
    try:
        assert isinstance(open_store("scratch://"), MemoryStore)
    finally:
        from byref.store import schemes

        schemes._registered.pop("scratch", None)
    with pytest.raises(byref.InvalidValue) as caught:
        register_scheme("file", StoreScheme("file://", lambda u: MemoryStore()))
    assert str(caught.value) == "Store scheme 'file' is byref's own; register another name."
    with pytest.raises(ValueError, match="must be a lower-case identifier"):
        register_scheme("Bad-Name", StoreScheme("x://", lambda u: MemoryStore()))
