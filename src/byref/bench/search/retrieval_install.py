"""The embeddings extra's installed size, as `byref bench search` reports it: the distributions
its requirements pull in beyond the core install, measured on disk in this environment."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any


def _requirement_names(dist: metadata.Distribution, extra: str | None) -> list[str]:
    out = []
    for req in dist.requires or []:
        name, _, marker = req.partition(";")
        marker = marker.strip()
        wants_extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if wants_extra and wants_extra.group(1) != extra:
            continue
        if not wants_extra and marker and not _marker_holds(marker):
            continue
        out.append(re.split(r"[\s\[<>=!~(;]", name.strip(), maxsplit=1)[0])
    return out


def _marker_holds(marker: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:  # without packaging, count the dependency
        return True
    return bool(Marker(marker).evaluate())


def closure(names: Iterable[str]) -> dict[str, int]:
    """Installed distributions reachable from `names` → bytes their files take on disk."""
    seen: dict[str, int] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            seen[key] = 0
            continue
        size = 0
        for f in dist.files or []:
            with contextlib.suppress(OSError):
                size += Path(str(f.locate())).stat().st_size
        seen[key] = size
        todo.extend(_requirement_names(dist, None))
    return seen


def extra_size(extra: str = "embeddings", project: str = "byref") -> dict[str, Any]:
    """Megabytes the extra's requirements (and theirs) take beyond the core install, as
    installed in this environment."""
    dist = metadata.distribution(project)
    core = closure(_requirement_names(dist, None))
    wanted = [n for n in _requirement_names(dist, extra)
              if n not in _requirement_names(dist, None)]
    extra_dists = closure(wanted)
    beyond = {k: v for k, v in extra_dists.items() if k not in core}
    missing = sorted(k for k, v in beyond.items() if v == 0)
    return {"extra_mb": round(sum(beyond.values()) / 1e6, 1),
            "core_mb": round(sum(core.values()) / 1e6, 1),
            "largest": sorted(((k, round(v / 1e6, 1)) for k, v in beyond.items()),
                              key=lambda kv: -kv[1])[:5],
            "not_installed": missing}

