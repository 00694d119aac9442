"""The lens is read-only by construction: head and get only, for its own scopes."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from _lens_rig import DemoRun

import byref.lens
from _source import parse
from byref.lens import Lens, ReadOnlyStore, load_run
from byref.store import FileStore, MemoryStore, PutOptions, Scope

WRITE_OR_ENUMERATE = ("put", "put_stream", "delete", "list", "get_stream", "close")


class Recording:
    """A real FileStore that records each verb called and refuses every one but head/get."""

    def __init__(self, inner: FileStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def head(self, scope: Scope, ref: str) -> Any:
        self.calls.append("head")
        return self.inner.head(scope, ref)

    def get(self, scope: Scope, ref: str) -> Any:
        self.calls.append("get")
        return self.inner.get(scope, ref)

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f"the lens called {name!r} on the store")


def test_the_view_has_no_verb_but_head_and_get() -> None:
    view = ReadOnlyStore(MemoryStore(), [Scope("a")])
    for name in WRITE_OR_ENUMERATE:
        assert not hasattr(view, name), name
    public = {n for n in dir(view) if not n.startswith("_")}
    assert public == {"head", "get", "scopes"}
    with pytest.raises(AttributeError):
        view.put = lambda *a: None  # type: ignore[attr-defined]  # slots: nothing can be added


def test_another_scope_answers_absent_like_a_missing_ref() -> None:
    store = MemoryStore()
    mine, theirs = Scope("acme", "alice"), Scope("acme", "bob")
    ref = store.put(theirs, b"secret", PutOptions(kind="note")).ref
    view = ReadOnlyStore(store, [mine])
    assert view.head(theirs, ref) is None and view.get(theirs, ref) is None
    assert view.head(mine, ref) is None
    assert ReadOnlyStore(store, [theirs]).get(theirs, ref) is not None  # the ref is real


def test_no_lens_module_names_a_write_verb() -> None:
    """Static: no call of put/delete/list/put_stream anywhere in the package's source."""
    root = Path(byref.lens.__file__).parent
    paths = sorted(root.rglob("*.py"))  # rglob: the modules live in sub-packages
    assert len(paths) > 14, paths
    for path in paths:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Attribute) and node.attr in ("put", "put_stream", "delete",
                                                                 "list", "get_stream"):
                raise AssertionError(f"{path.relative_to(root)}:{node.lineno} uses .{node.attr}")


def test_every_page_of_a_demo_run_calls_head_and_get_only(demo_run: DemoRun) -> None:
    recording = Recording(FileStore(demo_run.out / "store"))
    lens = Lens(load_run(demo_run.out, store=recording))  # type: ignore[arg-type]
    seen: set[str] = set()
    todo = ["/"]
    while todo:  # crawl every link the pages offer (bounded: the demo has few pages)
        target = todo.pop()
        if target in seen or len(seen) > 200:
            continue
        seen.add(target)
        response = lens.respond("GET", target)
        assert response.status == 200, target
        if response.content_type.startswith("text/html"):
            body = response.body.decode()
            todo += [h.replace("&amp;", "&") for h in re.findall(r'(?:href|src)="(/[^"#]*)"',
                                                                  body)]
    assert any("/page/1.png" in s for s in seen) and any("page=3" in s for s in seen)
    assert set(recording.calls) == {"head", "get"}
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert lens.respond(method, "/").status == 405


def test_the_run_directory_is_not_written(demo_run: DemoRun) -> None:
    before = {p: p.stat().st_mtime_ns for p in demo_run.out.rglob("*")}
    lens = Lens(load_run(demo_run.out))
    for target in ("/", "/result/4/0", "/artifact/nope"):
        lens.respond("GET", target)
    assert {p: p.stat().st_mtime_ns for p in demo_run.out.rglob("*")} == before
