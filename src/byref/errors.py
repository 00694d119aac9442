"""byref's errors, one root and three audiences. Pure: imports nothing of byref.

The law: every error byref raises on purpose is a `ByrefError`, and its class says who must act.

    ByrefError
    ├── Refused          the model: the tool did not run (or its result was refused); `text` is
    │   │                shown to the model as-is, `reason` is a short typed code for the trace
    │   ├── refs.RefRefusal ─ resolve.ResolveError, transcript.TranscriptLookupError,
    │   │                     tools.ToolInputError
    │   ├── tools.ToolRefusal, dispatch.Refusal
    │   └── jsonview.StaleSelectionError, jsonview.NotJsonError, discovery.FilterError
    ├── DeveloperError   the code calling byref: a wrong argument or setup; the message says what
    │   │                to do next
    │   ├── InvalidValue (also a ValueError), MisuseError (also a RuntimeError),
    │   │   InvalidType (a TypeError), UnknownName (a KeyError), MissingExtra (the one error for
    │   │   an extra that is not installed: a ModuleNotFoundError whose text is the install line),
    │   │   jsonview.JsonEncodeError (also a TypeError)
    │   ├── harness: ProviderSetupError (MissingSDKError, MissingKeyError), StepLimitError,
    │   │            ScriptExhaustedError; context.ContextBudgetError; discovery.OntologyError
    └── OperatorError    the deployment: a store, a config file, an upstream server, the host
        ├── store.ArtifactError (integrity, size, unavailable, URL, not found, versions)
        ├── gateway: ConfigError, UpstreamError, AccessRefused
        ├── harness.ProviderError, transcript.TranscriptCorruptError
        └── discovery: ListingError, UsageError; tools.IsolationUnavailable

Existing classes keep their stdlib bases (`ValueError`, `RuntimeError`, …) beside these, so code
that caught those still does. The CLI turns any `ByrefError` into one line and exit status 2, in
one place (`byref.cli.main`).
"""

from __future__ import annotations

import functools
import shlex
import sys
from typing import Literal

RefusalReason = Literal[
    # dispatch: the call itself
    "refused", "unknown-tool", "invalid-input", "invalid-arguments", "internal-error",
    # dispatch: references in the input and `wants` arguments
    "bad-ref", "missing-or-expired", "kind-mismatch", "integrity",
    # a tool body declining, or failing
    "tool-refused", "tool-error", "upstream-error", "upstream-failed", "not-permitted",
    # recording a result
    "truncated", "over-ceiling", "unserializable-result",
    # a store's damaged record
    "damaged-record",
    # read_result
    "gone", "not-readable", "parse-error",
    # run_python
    "isolation-unavailable", "code-error", "limit-cpu", "limit-memory", "limit-wall",
    "limit-disk", "limit-file-size", "limit-processes", "limit-output-files", "limit-output-bytes",
    # run_code (code mode): its inner calls and its channel
    "limit-calls", "call-timeout", "channel-protocol",
    # the gateway: programs running at once (byref.codeRuns)
    "limit-runs",
]
"""Every code a refusal carries (`Refused.reason`, the `reason` of a `refused` event): a closed
set, so a typo is a type error and a dashboard can list them all."""


class ByrefError(Exception):
    """The root of every error byref raises on purpose."""


class Refused(ByrefError):
    """Model-facing: the tool did not run, and `text` tells the model what went wrong and what
    would fit. `reason` is a short code recorded on the `refused` event."""

    reason: RefusalReason = "refused"


class DeveloperError(ByrefError):
    """The calling code used byref wrongly; the message says what to do instead."""


class InvalidValue(DeveloperError, ValueError):
    """An argument byref cannot use (a bad name, budget, scope, option); it says what fits."""


class MisuseError(DeveloperError, RuntimeError):
    """byref was used out of order (not started, closed, or outside its owner); it says what to
    do first."""


class InvalidType(DeveloperError, TypeError):
    """An argument of a type byref cannot use (a tool parameter without a hint, say)."""


class UnknownName(DeveloperError, KeyError):
    """A name byref does not know (a tool, a server); the message lists the ones it does."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""  # KeyError would quote the message


class MissingExtra(DeveloperError, ModuleNotFoundError):
    """An optional part of byref was used without its extra; the message is the install line."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs byref's {extra!r} extra: {install_hint(extra)}")
        self.extra = extra


class OperatorError(ByrefError):
    """The deployment failed byref: a store, a config file, an upstream server, the host."""


def install_hint(extra: str) -> str:
    """The command that adds byref's `extra` to the Python running byref, as it can be pasted:
    that interpreter's pip (a `make install` venv is not the `pip` on PATH) and, where byref was
    installed from a clone (pip records the directory: PEP 610's direct_url.json), that clone —
    byref is on no package index, so `pip install 'byref[mcp]'` would find nothing."""
    return f"{shlex.quote(sys.executable)} -m pip install {shlex.quote(f'{_source()}[{extra}]')}"


@functools.cache
def _source() -> str:
    """Where byref was installed from: the clone's directory when pip recorded one that still
    exists, else the project's name."""
    import json
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlsplit

    try:
        raw = metadata.distribution("byref").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        raw = None
    if raw:
        url = urlsplit(json.loads(raw).get("url", ""))
        if url.scheme == "file" and (Path(unquote(url.path)) / "pyproject.toml").is_file():
            return unquote(url.path)
    return "byref"


__all__ = [
    "ByrefError", "DeveloperError", "InvalidType", "InvalidValue", "MissingExtra", "MisuseError",
    "OperatorError", "RefusalReason", "Refused", "UnknownName", "install_hint",
]
