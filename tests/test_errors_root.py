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


STDLIB_RAISES = {
    ("byref/__init__.py", "AttributeError"): "a module's __getattr__ must raise AttributeError",
    ("byref/gateway/__init__.py", "AttributeError"): "a module's __getattr__ must raise "
                                                     "AttributeError",
    ("byref/gateway/wire/front.py", "ValueError"): "json.loads's parse_constant refusing NaN, "
                                                   "caught where it parses",
    ("byref/jsonview/select.py", "ImportError"): "ijson is no extra: its C backend is missing",
    ("byref/discovery/hybrid/encoder.py", "ImportError"):
        "the PyTorch reference encoder is the bench's, no extra of byref's",
    ("byref/gateway/access/jwks.py", "RuntimeError"): "control flow, caught a line below",
    ("byref/gateway/access/jwks.py", "ValueError"): "a failed fetch, caught and kept as "
                                                    "last_error for /readyz",
    ("byref/discovery/hybrid/vectorcache.py", "ValueError"): "a damaged cache file, caught by "
                                                             "its reader, which rebuilds it",
    ("byref/discovery/lexical/related.py", "KeyError"): "a Mapping's own protocol",
    ("byref/store/port.py", "TypeError"): "control flow, re-raised as ArtifactIntegrityError",
    ("byref/transcript_lines.py", "OSError"): "an I/O fault of byref's own file, handled where "
                                              "the disk's are",
    ("byref/conversations/lines.py", "RuntimeError"): "an invariant of byref's own encoder",
    ("byref/tools/mcp_content.py", "ValueError"): "an upstream's bad base64: dispatch records it "
                                                  "as that tool's error",
    ("byref/integrations/pydantic_ai.py", "RuntimeError"): "a tool's failure handed to "
                                                           "pydantic-ai, whose loop reports it",
    ("byref/integrations/langchain.py", "RuntimeError"): "a tool's failure handed to LangChain",
    ("byref/tools/code_mode/code_child.py", "*"): "runs in the sandbox, where byref is absent",
    ("byref/gateway/wire/stdio.py", "BrokenPipeError"): "a closed pipe, as the stream's reader "
                                                        "expects it",
    ("byref/gateway/wire/deepjson.py", "ValueError"): "a JSON reader's error, as json.loads "
                                                      "raises it; malformed.py answers it",
    ("byref/bench/*", "*"): "a bench's failed setup; `byref bench` prints it in one line",
}
"""Where byref's own code may raise a stdlib exception, and why; anything else is a ByrefError."""
PROTOCOL = (StopIteration, StopAsyncIteration, NotImplementedError, AssertionError)
"""Raised for Python's own protocols (iteration, abstract methods, assertions), not as errors."""


def test_byref_raises_its_own_errors_except_where_listed() -> None:
    import ast
    import builtins
    from pathlib import Path

    root = Path(byref.__file__).parent.parent
    stray: list[str] = []
    for path in sorted(root.joinpath("byref").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.id if isinstance(target, ast.Name) else ""
            kind = getattr(builtins, name, None)
            if not (inspect.isclass(kind) and issubclass(kind, Exception)) or kind in PROTOCOL:
                continue
            if not any((where == rel or (where.endswith("/*") and rel.startswith(where[:-1])))
                       and what in (name, "*") for where, what in STDLIB_RAISES):
                stray.append(f"{rel}:{node.lineno} raises {name}")
    assert stray == [], ("raise a byref.errors class (InvalidValue, MisuseError, InvalidType, "
                         "UnknownName, MissingExtra…), or list the site with its reason")
