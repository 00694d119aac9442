"""The config file's values: its one error type and the checks every section shares.

Owns `ConfigError` and the parsers of a config's small values (positive numbers, name lists,
string maps, `${VAR}` expansion). The law: each failure names where (`at`) and what would fit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from byref.errors import OperatorError

_VAR = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)


class ConfigError(OperatorError, ValueError):
    """The config file cannot be used; the text names where and what would fit."""


def number(value: Any, at: str) -> float:
    """`value` as a positive float; ConfigError naming `at` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"Config {at} must be a positive number, got {value!r}.")
    return float(value)


def names(value: Any, at: str, key: str) -> tuple[str, ...] | None:
    """A list of names or globs (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"Config {at}: {key!r} must be a list of names or globs, got "
                          f"{value!r}.")
    return tuple(value)


def strings(value: Any, at: str, key: str,
            environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """An object of strings, each `${VAR}`-expanded from `environ` when given."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise ConfigError(f"Config {at}: {key!r} must be an object of strings, got {value!r}.")
    if environ is None:
        return dict(value)
    return {k: expand(v, at, f"{key}.{k}", environ) for k, v in value.items()}


def expand(text: str, at: str, key: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` (the default when VAR is unset or empty) from `environ`."""

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        found = _VAR_NAME.match(inner)
        if found is None:
            raise ConfigError(f"Config {at}: {key!r} has {match.group(0)!r}, which is not "
                              "${VAR} or ${VAR:-default}.")
        var, default = found.group(1), found.group(2)
        value = environ.get(var)
        if value:
            return value
        if default is not None:
            return default
        if value is not None:
            return value  # set and empty, no default: empty, as a shell gives it
        raise ConfigError(f"Config {at}: {key!r} uses ${{{var}}}, which is not set; set it or "
                          f"write ${{{var}:-default}}.")

    return _VAR.sub(one, text)
