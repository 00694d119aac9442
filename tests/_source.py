"""Parsing byref's own source in tests that read it (layers, refusal reasons, the front door).

Why a helper: CPython 3.11 before 3.11.8 keeps the AST constructor's recursion counter in the
module's shared state (gh-106905), so a parse racing another thread's parse in the same process
(an xdist worker's leftover thread) fails with "AST constructor recursion depth mismatch". The
parse is retried a few times; a real SyntaxError still raises at once.
"""

from __future__ import annotations

import ast
from pathlib import Path


def parse(path: Path, filename: str | None = None) -> ast.Module:
    """The module at `path` parsed (retried past the CPython race named above)."""
    text = path.read_text()
    for _ in range(4):
        try:
            return ast.parse(text, filename or str(path))
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
            last = exc
    raise last
