"""Every exception class byref defines is under `byref.errors`' root, so a caller can catch
byref's errors in one place and the class says who must act. Private classes (a leading
underscore) are control flow inside one module and never escape it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import byref
from byref.errors import ByrefError, DeveloperError, OperatorError, Refused


def _modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(byref.__path__, "byref.")
             if not info.name.endswith("__main__")]  # running a CLI is not importing it
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra not installed here
            continue
        loaded.append(name)
    return loaded


SANDBOXED = {"byref.tools.code_mode.code_child"}
"""Programs run inside run_code's sandbox, which cannot import byref: their errors are the
program's (`tools.ToolError`), never raised in byref's own process."""


def test_every_exception_byref_defines_is_under_the_root() -> None:
    outside: list[str] = []
    seen = 0
    for name in [m for m in _modules() if m not in SANDBOXED]:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if value.__module__ != name or attr.startswith("_") or issubclass(value, Warning):
                continue  # a warning is advice to the developer, not an error
            seen += 1
            if not issubclass(value, ByrefError):
                outside.append(f"{name}.{attr}")
    assert seen > 30  # the walk reached the library, not an empty package
    assert outside == []


def test_every_error_has_one_audience() -> None:
    audiences = (Refused, DeveloperError, OperatorError)
    mixed: list[str] = []
    for name in _modules():
        for attr, value in vars(importlib.import_module(name)).items():
            if (inspect.isclass(value) and issubclass(value, ByrefError)
                    and value.__module__ == name and not attr.startswith("_")
                    and value is not ByrefError
                    and sum(issubclass(value, a) for a in audiences) != 1):
                mixed.append(f"{name}.{attr}")
    assert mixed == []
