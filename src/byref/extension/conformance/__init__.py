"""The public `dev.byref/refs` battery: any server claiming the extension runs the same laws.

Owns the cases (`cases`), the probe contract (`probe`) and the harness and report (`runner`).
The law: a case holds one rule of docs/extensions/refs.md and reads only the wire.

    report = anyio.run(run_refs_conformance, RefsTarget("mine", command=["python", "srv.py"]))
"""

from byref.extension.conformance.cases import CASES, Case, CaseName, NotApplicable
from byref.extension.conformance.probe import probe_digest, probe_text
from byref.extension.conformance.runner import (
    RefsCaseResult,
    RefsReport,
    RefsTarget,
    format_refs_report,
    run_refs_conformance,
)

__all__ = [
    "CASES", "Case", "CaseName", "NotApplicable", "RefsCaseResult", "RefsReport", "RefsTarget",
    "format_refs_report", "probe_digest", "probe_text", "run_refs_conformance",
]
