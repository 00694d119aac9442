"""The public `dev.byref/refs` battery: any server claiming the extension runs the same laws.

Owns the cases (`cases`: §1–§9; `host_cases`: the host methods), the probe contract (`probe`)
and the harness (`runner`; results and reports are `byref.battery`'s, as every battery's).
The law: a case holds one rule of docs/extensions/refs.md and reads only the wire.

    report = anyio.run(run_refs_conformance, RefsTarget("mine", command=["python", "srv.py"]))
"""

from byref.battery import CaseResult, Report
from byref.extension.conformance.cases import Case, CaseName, NotApplicable
from byref.extension.conformance.probe import add_probe_tools, probe_digest, probe_text
from byref.extension.conformance.runner import (
    CASES,
    RefsTarget,
    format_refs_report,
    run_refs_conformance,
)

__all__ = [
    "CASES",
    "Case",
    "CaseName",
    "CaseResult",
    "NotApplicable",
    "RefsTarget",
    "Report",
    "add_probe_tools",
    "format_refs_report",
    "probe_digest",
    "probe_text",
    "run_refs_conformance",
]
