"""A deterministic work-items export: the status-report scenario's 2.1 MB of JSON (or 2 GB).

Written one item per line, streaming, so generating a 2 GB export holds one item at a time. The
default size carries exactly 148 open items; larger sizes scale the open count with the size.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from byref.errors import InvalidValue

DEFAULT_SIZE = 2_100_000
DEFAULT_OPEN = 148
PROJECT = "ATLAS"
_UNITS = {"": 1, "B": 1, "KB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}

_VERBS = ("Fix", "Refactor", "Document", "Investigate", "Migrate", "Harden", "Profile", "Remove")
_THINGS = ("login redirect", "billing export", "search ranking", "upload retries", "audit log",
           "rate limiter", "webhook signatures", "session cache", "CSV importer", "PDF renderer")
_WHERE = ("on mobile Safari", "for EU tenants", "under load", "after the v3 cut-over",
          "in the admin console", "for archived projects", "behind the proxy", "at midnight UTC")
_PEOPLE = ("amara", "bruno", "chen", "dagny", "elif", "farid", "greta", "hiro", "ines", "jonas")
_OTHER_STATUSES = ("in_progress", "blocked", "in_review", "done", "closed")
_WORDS = ("the", "request", "fails", "when", "a", "user", "retries", "after", "timeout", "and",
          "cache", "entry", "is", "stale", "so", "we", "should", "invalidate", "on", "write",
          "customers", "reported", "this", "twice", "since", "deploy", "logs", "show", "spike")


def parse_size(text: str) -> int:
    """'2.1MB' → 2_100_000; also accepts plain byte counts."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?B?)\s*", text.upper())
    if not match:
        raise InvalidValue(f"Cannot read size {text!r}; write it like '2MB', '200MB' or '2GB'.")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True, slots=True)
class ExportInfo:
    """A written export: its path, size, and how many items (and open items) it holds."""
    path: Path
    bytes: int
    items: int
    open_items: int


def _item(i: int, status: str, rng: random.Random) -> dict[str, Any]:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(45, 60))]
    return {
        "id": f"WI-{i + 1:07d}",
        "title": f"{rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_WHERE)}",
        "status": status,
        "priority": rng.choice(("P0", "P1", "P2", "P3")),
        "assignee": rng.choice(_PEOPLE),
        "project": PROJECT,
        "created": f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}",
        "updated": f"2026-11-{rng.randint(1, 28):02d}",
        "labels": sorted(rng.sample(("backend", "frontend", "infra", "security", "ux", "data"),
                                    rng.randint(1, 3))),
        "estimate_hours": round(rng.uniform(0.5, 40.0), 1),
        "description": " ".join(words).capitalize() + ".",
    }


def plan(size: int, open_items: int | None = None) -> tuple[int, int]:
    """How many items, and how many of them open, make an export of about `size` bytes.

    Open items scale with the size unless `open_items` fixes their number."""
    rng = random.Random(7)
    sample = [len(msgspec.json.encode(_item(i, "open", rng))) + 2 for i in range(400)]
    average = sum(sample) / len(sample)
    items = max(1, round((size - 80) / average))
    if open_items is None:
        open_items = max(1, round(DEFAULT_OPEN * size / DEFAULT_SIZE))
    return items, min(open_items, items)


def write_export(
    path: Path, size: int = DEFAULT_SIZE, *, open_items: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> ExportInfo:
    """Write a deterministic work-item export of about `size` bytes to `path`; returns what it
    holds."""
    items, open_items = plan(size, open_items)
    rng = random.Random(2026)
    # Open items spread evenly through the export, the rest take the other statuses.
    open_at = {(j * items) // open_items + rng.randrange(max(1, items // open_items))
               for j in range(open_items)}
    open_at = {min(i, items - 1) for i in open_at}
    while len(open_at) < open_items:  # collisions at tiny sizes
        open_at.add(rng.randrange(items))
    encoder = msgspec.json.Encoder()
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with path.open("wb") as fh:
        head = f'{{"project":"{PROJECT}","exportedAt":"2026-11-29T09:00:00Z","count":{items},'
        fh.write(head.encode() + b'"items":[\n')
        for i in range(items):
            status = "open" if i in open_at else rng.choice(_OTHER_STATUSES)
            line = encoder.encode(_item(i, status, rng))
            fh.write(line + (b",\n" if i < items - 1 else b"\n"))
            written += len(line) + 2
            if progress is not None and i % 2000 == 0:
                progress(written)
        fh.write(b"]}\n")
    return ExportInfo(path, path.stat().st_size, items, len(open_at))


def open_rows(path: Path) -> list[dict[str, Any]]:
    """The open items, read independently of byref (stdlib json, one line at a time)."""
    import json

    rows = []
    with path.open("rb") as fh:
        for line in fh:
            line = line.strip().rstrip(b",")
            if line.startswith(b'{"id"'):
                item = json.loads(line)
                if item["status"] == "open":
                    rows.append(item)
    return rows
