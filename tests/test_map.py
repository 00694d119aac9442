"""One map: docs/ARCHITECTURE.md names every module of a regrouped folder on its folder's row, a
wing's `__init__` says in one sentence what the wing is for, and every module a docstring names
(`byref.…` or a path `…/….py`) exists."""

from __future__ import annotations

import ast
import importlib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import byref
from _source import parse

SRC = Path(byref.__file__).parent
ROOT = SRC.parents[1]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"

# Regrouped folders: every module under one is named (`stem`) on its row of the page.
ROOMS: dict[str, str] = {
    **{f"gateway/{wing}": f"`{wing}/`" for wing in (
        "config", "access", "ops", "wire", "upstream", "catalog", "passthrough", "edge")},
    **{f"tools/{room}": f"`{room}/`" for room in ("readers", "run_python", "code_mode")},
    **{f"{package}/{folder.name}": f"`{package}/{folder.name}/`"
       for package in ("discovery", "lens", "dispatch")
       for folder in sorted((SRC / package).iterdir()) if (folder / "__init__.py").exists()},
}


def _rows() -> list[str]:
    return [line for line in PAGE.read_text().splitlines() if line.startswith("| ")]


def test_the_page_names_every_module_of_a_regrouped_folder() -> None:
    rows = _rows()
    missing: list[str] = []
    for folder, label in ROOMS.items():
        row = next((r for r in rows if r.startswith(f"| {label} |")), None)
        assert row is not None, f"docs/ARCHITECTURE.md has no row {label} for {folder}/"
        for path in sorted((SRC / folder).rglob("*.py")):
            if path.name != "__init__.py" and f"`{path.stem}`" not in row:
                missing.append(str(path.relative_to(SRC)))
    assert missing == [], f"not on docs/ARCHITECTURE.md's rows: {missing}"


def test_a_wings_door_says_what_it_is_for_in_one_sentence() -> None:
    """The map is the page; a wing's `__init__` docstring is one sentence (no module list)."""
    long: list[str] = []
    for door in sorted((SRC / "gateway").glob("*/**/__init__.py")):
        doc = ast.get_docstring(parse(door)) or ""
        if len(re.findall(r"[.!?](?:\s|$)", doc.strip())) != 1 or "\n\n" in doc:
            long.append(str(door.relative_to(SRC)))
    assert long == []


_DOTTED = re.compile(r"(?<![\w.])byref(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w-]+\.py)\b")


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every docstring (a module's, class's or function's, and an attribute's)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
                node.value.value, str):
            yield node.lineno, node.value.value


def _module_exists(name: str) -> bool:
    """`byref.gateway.edge.answer` or `byref.refs.quote`: the longest module prefix exists and
    what follows it is one of its names. A name whose second part is no byref package or module
    (`byref.codeMode`, a config key) is not a module's."""
    parts = name.split(".")
    if not ((SRC / parts[1]).is_dir() or (SRC / f"{parts[1]}.py").exists()):
        return True
    for end in range(len(parts), 1, -1):
        rel = Path(*parts[1:end])
        if (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists():
            rest = parts[end:]
            return not rest or hasattr(importlib.import_module(".".join(parts[:end])), rest[0])
    return False


def test_every_module_a_docstring_names_exists() -> None:
    files = [p.relative_to(ROOT).as_posix() for base in ("src", "tests", "scripts")
             for p in (ROOT / base).rglob("*.py")]
    stale: list[str] = []
    for base in (SRC, ROOT / "tests"):
        for path in sorted(base.rglob("*.py")):
            for line, text in _strings(parse(path)):
                where = f"{path.relative_to(ROOT)}:{line}"
                stale += [f"{where} {m}" for m in _DOTTED.findall(text) if not _module_exists(m)]
                stale += [f"{where} {m}" for m in _PATH.findall(text)
                          if not any(f == m or f.endswith(f"/{m}") for f in files)]
    assert stale == [], "\n".join(stale)


# A measured result in a docstring: a recall figure, a before → after figure, a ×ratio.
_FIGURE = re.compile(r"recall@\d|\d\s*(?:ms|µs|%)?\s*→\s*[−-]?\d|×\s?\d+\.\d+")


def _docstrings(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every docstring of a module: its own, its classes' and functions', and its attributes'."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            doc = ast.get_docstring(node)
            if doc:
                yield getattr(node, "lineno", 1), doc
            for before, after in itertools.pairwise(body):
                if (isinstance(before, (ast.Assign, ast.AnnAssign)) and isinstance(after, ast.Expr)
                        and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    yield after.lineno, after.value.value


def test_figures_live_in_benches_and_the_notes_not_in_docstrings() -> None:
    """A docstring says what code owns and the law it keeps; how a choice was measured goes to
    docs/NOTES.md (or the bench that measures it), where it can be rerun and updated."""
    found = [f"{path.relative_to(SRC)}:{line}"
             for path in sorted(SRC.rglob("*.py")) if "bench" not in path.relative_to(SRC).parts
             for line, doc in _docstrings(parse(path)) if _FIGURE.search(doc)]
    assert found == [], f"figures in docstrings (move them to docs/NOTES.md): {found}"
