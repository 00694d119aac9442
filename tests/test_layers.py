"""byref's layers: every import points downward (the table below; docs/ARCHITECTURE.md
explains it), so a module can be read knowing only what lies below it. The benchmarks sit above the
library: only the CLI imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import byref
from _source import parse

SRC = Path(byref.__file__).parent

# Lowest first; a package may import only packages of a lower rank (and itself).
LAYERS: list[set[str]] = [
    {"errors", "__version__", "defaults"},
    {"refs", "media", "battery"},
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
    {"integrations", "lens", "testing", "demo", "extension"},
    {"gateway"},
    {"bench", "eval"},
    {"cli"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _package(module: str) -> str:
    """`byref.dispatch.pipeline` → `dispatch`; `byref` itself is the front door."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "byref"


def _imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(parse(path)):
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


# The gateway's wings, lowest first; a gateway module may import only its own wing and lower
# ones (its `__init__` re-exports the public names). `core` keeps the gateway's life and the
# call sequence; `edge` is where clients meet it.
GATEWAY_WINGS: list[set[str]] = [
    {"config"},
    {"access", "ops", "wire"},
    {"upstream"},
    {"catalog"},
    {"passthrough"},
    {"core"},
    {"edge"},
]
WING_RANK = {name: rank for rank, names in enumerate(GATEWAY_WINGS) for name in names}


def _wing(module: str) -> str | None:
    """`byref.gateway.upstream.relay` → `upstream`; None outside the gateway or for its door."""
    parts = module.split(".")
    if parts[:2] != ["byref", "gateway"] or len(parts) < 3:
        return None
    return parts[2]


def test_the_gateway_wings_point_downward() -> None:
    gateway = SRC / "gateway"
    upward: list[str] = []
    for path in sorted(gateway.rglob("*.py")):
        rel = path.relative_to(gateway)
        if rel == Path("__init__.py"):
            continue
        me = rel.parts[0].removesuffix(".py")
        assert me in WING_RANK, f"gateway/{rel}: wing {me!r} has no rank; add it to GATEWAY_WINGS"
        for line, module in _imports(path):
            other = _wing(module)
            if module == "byref.gateway":
                upward.append(f"gateway/{rel}:{line} imports the gateway's front door")
            elif other is not None and other != me and WING_RANK[other] >= WING_RANK[me]:
                upward.append(f"gateway/{rel}:{line} ({me}) imports {module} ({other})")
    assert upward == []


def test_the_gateway_root_holds_only_its_life() -> None:
    """Everything else has a wing: a newcomer finds a room by its folder."""
    loose = sorted(p.name for p in (SRC / "gateway").glob("*.py"))
    assert loose == ["__init__.py", "core.py"]


# Folders inside a package, lowest first: a module in one may import its own folder and lower
# ones, never a higher one (the package's loose modules may use any, unless ranked: a loose
# module named here, `relay.py`, is ranked as a folder is). Folders in one rank are siblings that
# never import each other (dispatch's before and after the tool runs).
FOLDER_ORDER: dict[str, list[set[str]]] = {
    "lens": [{"reading"}, {"pages"}, {"serving"}],
    "dispatch": [{"inbound", "outbound"}],
    "discovery": [{"catalog"}, {"lexical"}, {"page"}, {"hybrid", "declaring"}],
    "gateway/upstream": [{"relay.py"}, {"modern"}, {"instance"}],
}
KNOWN_CROSSINGS = {
    "discovery/catalog/catalog.py": {"byref.discovery.lexical.index"},
}
"""The one crossing left, with its reason: `Catalog.index()` builds and keeps the catalog's
`SearchIndex` (one build at a time, reused while the catalog is unchanged), so the catalog names
the index it keeps; lexical reads the catalog's entries. Undoing it changes `Catalog.index`, a
public method, or gives lexical a protocol of its entries."""


def _room(module: str, package: str) -> str | None:
    """`byref.lens.pages.markup` → `pages` (for package `lens`); `byref.gateway.upstream.relay` →
    `relay.py` (for `gateway/upstream`); None outside the package or for its door."""
    parts, prefix = module.split("."), ["byref", *package.split("/")]
    if parts[:len(prefix)] != prefix or len(parts) == len(prefix):
        return None
    rest = parts[len(prefix):]
    return rest[0] if len(rest) > 1 else f"{rest[0]}.py"


def test_folders_inside_a_package_import_one_way() -> None:
    crossing: list[str] = []
    for package, order in FOLDER_ORDER.items():
        rank = {name: i for i, names in enumerate(order) for name in names}
        for path in sorted((SRC / package).rglob("*.py")):
            rel = path.relative_to(SRC / package)
            mine = rel.parts[0]
            if mine == "__init__.py" or (mine not in rank and len(rel.parts) == 1):
                continue  # the door, or a loose module left free
            assert mine in rank, f"{package}/{rel}: folder {mine!r} has no place in FOLDER_ORDER"
            known = KNOWN_CROSSINGS.get(f"{package}/{rel}", set())
            for line, module in _imports(path):
                theirs = _room(module, package)
                if (theirs is not None and theirs != mine and theirs in rank
                        and rank[theirs] >= rank[mine] and module not in known):
                    crossing.append(f"{package}/{rel}:{line} ({mine}) imports {module}")
    assert crossing == []


SDK_COMPAT = {"gateway/wire/sdk_server.py", "gateway/wire/sdk_client.py"}


def test_sdk_internals_are_read_in_the_two_compatibility_modules_alone() -> None:
    """A private `mcp.*` module, or an SDK object's private attribute read by name, appears
    nowhere in `src/` but `gateway/wire/sdk_server.py` (server edge) and
    `gateway/wire/sdk_client.py` (upstream client)."""
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel in SDK_COMPAT:
            continue
        tree = parse(path, rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                private = [p for p in node.module.split(".") if p.startswith("_")]
                if node.module.split(".")[0] == "mcp" and (
                        private or any(a.name.startswith("_") for a in node.names)):
                    found.append(f"{rel}:{node.lineno} imports {node.module}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "getattr" and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant)
                  and str(node.args[1].value) in {"_connection", "_session_manager",
                                                  "_task_group", "_exit_callbacks", "_stream",
                                                  "_server_instances", "_handle_request",
                                                  "_lifespan_state"}):
                found.append(f"{rel}:{node.lineno} reads {node.args[1].value}")
    assert found == []


def test_the_architecture_page_names_every_layer_and_wing() -> None:
    """docs/ARCHITECTURE.md is the map a newcomer reads first: it names every package of the
    layer table and every gateway wing, in the order the tables give."""
    page = (SRC.parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    for rank, names in enumerate(LAYERS):
        names = names - {"__version__"}
        row = next((r for r in rows if r.startswith(f"| {rank} |")), None)
        assert row is not None, f"docs/ARCHITECTURE.md has no row for layer {rank}"
        assert all(f"`{n}`" in row for n in names), (rank, names, row)
    wings = [w for names in GATEWAY_WINGS for w in sorted(names)]
    for wing in wings:
        label = "`core.py`" if wing == "core" else f"`{wing}/`"
        assert any(r.startswith(f"| {label} |") for r in rows), f"no row for wing {wing!r}"
