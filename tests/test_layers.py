"""byref's layers: every import points downward (DESIGN.md's table, with the packages added
since), so a module can be read knowing only what lies below it. The benchmarks sit above the
library: only the CLI imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import byref

SRC = Path(byref.__file__).parent

# Lowest first; a package may import only packages of a lower rank (and itself).
LAYERS: list[set[str]] = [
    {"errors", "__version__"},
    {"refs", "media"},
    {"events", "jsonview"},
    {"store", "transcript_lines"},
    {"transcript"},
    {"conversations", "resolve"},
    {"reads"},
    {"tools"},
    {"dispatch"},
    {"discovery"},
    {"context"},
    {"harness"},
    {"integrations", "lens", "testing", "demo"},
    {"gateway"},
    {"bench"},
    {"cli"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _package(module: str) -> str:
    """`byref.dispatch.pipeline` → `dispatch`; `byref` itself is the front door."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "byref"


def _imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "byref":
                found += [(node.lineno, f"byref.{a.name}") for a in node.names]
            elif node.module.startswith("byref."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("byref.")]
    return found


def test_every_import_points_downward() -> None:
    upward: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel == Path("__init__.py"):
            continue  # the front door re-exports from every layer (lazily)
        me = rel.parts[0].removesuffix(".py")
        assert me in RANK, f"{rel}: package {me!r} has no layer; add it to LAYERS"
        for line, module in _imports(path):
            other = _package(module)
            assert other in RANK, f"{rel}:{line} imports {module!r}, which has no layer"
            if other != me and RANK[other] >= RANK[me]:
                upward.append(f"{rel}:{line} ({me}) imports {module} ({other})")
    assert upward == []


def test_the_benchmarks_are_imported_by_the_cli_alone() -> None:
    importers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        for _, module in _imports(path)
        if _package(module) == "bench" and path.relative_to(SRC).parts[0] != "bench"
    }
    assert importers and all(p.startswith("cli/") for p in importers), importers
