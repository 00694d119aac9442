"""The public conformance battery: the laws every adapter, ours or a user's, must pass.

Owns the harness, runner and report (`runner`), the cases (`_cases`, `_cases_damage`,
`_cases_streams`) and the damage staged beside a store's port (`corruption`). The law: production
adapters import nothing from here; the battery reaches past the five verbs only through named
hooks. The runner's public names are importable from this package.
"""

from byref.store.conformance.corruption import Damage, find_damage, register_damage
from byref.store.conformance.runner import (
    CASES,
    Case,
    CaseName,
    CaseResult,
    Hook,
    Kit,
    Outcome,
    Report,
    StoreBattery,
    battery_for_url,
    format_report,
    run_case,
    run_conformance,
)

__all__ = [
    "CASES", "Case", "CaseName", "CaseResult", "Damage", "Hook", "Kit", "Outcome", "Report",
    "StoreBattery", "battery_for_url", "find_damage", "format_report", "register_damage",
    "run_case", "run_conformance",
]
