"""The store scheme registry: a package's adapter joins through a real `byref.stores` entry
point (a dist-info on sys.path, as pip installs one), opens by URL, and runs the battery; its
damage hooks join the battery the same way (`byref.store_damage`), never from the adapter; an
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
from byref.store.conformance.corruption import BUILTIN_DAMAGE, find_damage, register_damage
from byref.store.conformance.runner import (
    CASES,
    Case,
    battery_for_url,
    format_report,
    run_case,
    run_conformance,
)
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

DAMAGE = '''
from byref.store.conformance.corruption import BUILTIN_DAMAGE, Damage

MEMORY = BUILTIN_DAMAGE["memory"]  # a vault is a MemoryStore underneath
DAMAGE = Damage(MEMORY.read, MEMORY.write)
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
        sys.modules.pop("byref_vault_demo_testing", None)
        from byref.store import schemes
        from byref.store.conformance import corruption

        schemes._registered.pop("vault", None)
        corruption._registered.pop("vault", None)


def _with_damage(root: Path) -> None:
    """The same package, now also shipping its damage hooks in a testing module."""
    (root / "byref_vault_demo_testing.py").write_text(DAMAGE)
    points = root / "byref_vault_demo-1.0.dist-info" / "entry_points.txt"
    points.write_text(points.read_text()
                      + "[byref.store_damage]\nvault = byref_vault_demo_testing:DAMAGE\n")
    importlib.invalidate_caches()


def test_an_entry_point_adapter_opens_by_url_and_passes_the_battery(vault_package: None) -> None:
    store = open_store("vault://main?label=blue&ttl=60")
    assert isinstance(store, MemoryStore) and store.label == "blue"  # type: ignore[attr-defined]
    assert store.retention is not None and store.retention.ttl == 60
    with pytest.raises(StoreURLError, match="options this adapter does not know: colour"):
        open_store("vault://main?colour=red")
    report = run_conformance(battery_for_url("vault://x"))
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes["round-trip"] == outcomes["one-absence"] == "passed"
    # No damage registered: the damage cases say a hook is missing instead of passing silently.
    assert outcomes["corrupt-refused-by-get"] == "failed"
    assert "corrupt" in next(r.detail for r in report.results
                             if r.name == "corrupt-refused-by-get")
    # Once loaded, the scheme is listed among the accepted forms of an unknown URL.
    with pytest.raises(StoreURLError, match=r"s3://bucket/prefix, vault://NAME \(for example"):
        open_store("ftp://x")


def test_an_adapters_damage_hooks_join_the_battery_through_an_entry_point(
        vault_package: None, tmp_path: Path) -> None:
    _with_damage(tmp_path)
    assert find_damage("vault") is not None
    report = run_conformance(battery_for_url("vault://x"))
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes["corrupt-refused-by-get"] == "passed"
    assert outcomes["damaged-bytes-refused-everywhere"] == "passed", format_report(report)


def test_registering_damage_at_run_time_and_its_mistakes() -> None:
    register_scheme("scratch", StoreScheme("scratch://", lambda u: MemoryStore(**u.common)))
    try:
        assert run_case(_case("corrupt-refused-by-get"),
                        battery_for_url("scratch://")).outcome == "failed"
        register_damage("scratch", BUILTIN_DAMAGE["memory"])
        assert run_case(_case("corrupt-refused-by-get"),
                        battery_for_url("scratch://")).outcome == "passed"
    finally:
        from byref.store import schemes
        from byref.store.conformance import corruption

        schemes._registered.pop("scratch", None)
        corruption._registered.pop("scratch", None)
    with pytest.raises(byref.InvalidValue) as caught:
        register_damage("s3", BUILTIN_DAMAGE["memory"])
    assert str(caught.value) == "Store scheme 's3' is byref's own; its damage is built in."


def test_no_adapter_module_carries_a_damage_hook() -> None:
    import byref.store.adapters._sql as sql
    import byref.store.adapters.file as file
    import byref.store.adapters.memory as memory
    import byref.store.adapters.postgres as postgres
    import byref.store.adapters.s3 as s3
    import byref.store.adapters.sqlite as sqlite

    for module in (memory, file, sqlite, postgres, s3, sql):
        source = Path(module.__file__ or "").read_text()
        assert "stage_" not in source and "_flip_first_chunk" not in source, module.__name__


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def test_an_unknown_scheme_is_an_unknown_store_url_for_the_battery_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert find_scheme("gcs") is None
    with pytest.raises(StoreURLError, match="Unknown store URL 'gcs://x'; use one of:"):
        battery_for_url("gcs://x")
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
