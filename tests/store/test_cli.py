"""`byref store …` end to end through the real argument parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from byref.cli import main
from byref.store import PutOptions, Scope, open_store


@pytest.mark.parametrize("adapter", ["memory", "file", "sqlite", "postgres", "s3"])
def test_store_check_json_report(
    adapter: str, make_url: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["store", "check", make_url(adapter), "--json"])
    report = msgspec.json.decode(capsys.readouterr().out)
    assert code == 0
    assert report["ok"] is True
    for case in report["cases"]:
        assert case["outcome"] in ("passed", "declared"), case
        if case["outcome"] == "declared":
            assert case["detail"]


def test_operator_verbs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{tmp_path}"
    store = open_store(url)
    scope = Scope("acme", "ops", "c1")
    meta = store.put(scope, b"hello bytes", PutOptions(kind="doc/text", label="greeting"))
    who = ["--tenant", "acme", "--principal", "ops", "--conversation", "c1"]

    assert main(["store", "ls", url, *who, "--json"]) == 0
    listing = msgspec.json.decode(capsys.readouterr().out)
    assert [i["ref"] for i in listing["items"]] == [meta.ref]
    assert listing["nextCursor"] is None

    assert main(["store", "head", url, meta.ref, *who, "--json"]) == 0
    assert msgspec.json.decode(capsys.readouterr().out)["label"] == "greeting"

    out = tmp_path / "out.bin"
    assert main(["store", "get", url, meta.ref, *who, "-o", str(out)]) == 0
    assert out.read_bytes() == b"hello bytes"

    assert main(["store", "head", url, meta.ref, "--tenant", "ACME"]) == 1
    assert capsys.readouterr().err.startswith(f"Artifact {meta.ref!r} is not available")

    assert main(["store", "rm", url, meta.ref, *who]) == 0
    assert capsys.readouterr().out.strip() == "deleted"
    assert main(["store", "rm", url, meta.ref, *who]) == 0
    assert capsys.readouterr().out.startswith("nothing to delete")


def test_bad_url_exits_2_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "ls", "ftp://x", "--tenant", "t"]) == 2
    assert capsys.readouterr().err.startswith("error: Unknown store URL 'ftp://x'; use one of:")


def test_get_of_damaged_bytes_leaves_no_file_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from byref.store.conformance.corruption import find_damage

    url = f"file://{tmp_path / 'store'}"
    store = open_store(url)
    scope = Scope("acme")
    data = bytes(3 << 20)
    meta = store.put(scope, data, PutOptions(kind="k", digest=True))
    damage = find_damage("file")
    assert damage is not None
    damage.rewrite(store, scope, meta.ref, data[:-1] + b"\x01")
    out = tmp_path / "out.bin"
    assert main(["store", "get", url, meta.ref, "--tenant", "acme", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: Artifact {meta.ref!r} failed its integrity check while being streamed: the "
        f"bytes read do not match {meta.digest!r}, so the last chunk was withheld. Re-create "
        "it; do not trust this copy.\n")
    assert not out.exists()
