"""The scenario's own tools: the system of record's export, and a PDF report writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from byref.errors import InvalidValue, MissingExtra
from byref.tools import Payload, Tool, tool


@dataclass
class Delivered:
    """What generate_pdf actually received, kept for the ledger's fidelity check."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0


def make_tools(export_path: Path, pdf_path: Path, delivered: Delivered) -> list[Tool]:
    """The demo's tools over the export at `export_path`: export the work items and generate the
    PDF at `pdf_path`."""

    @tool(capabilities=("work_items.export",), entities=("work_item",))
    def export_work_items(project: str) -> Payload:
        """Export every work item of a project as one JSON document
        ({"project", "count", "items": [...]}; each item has id, title, status, priority,
        assignee, updated, description)."""
        if project.upper() != "ATLAS":
            raise InvalidValue(f"Unknown project {project!r}; the only project is 'ATLAS'.")
        return Payload.from_path(export_path, "application/json", kind="export/work-items",
                                 label=f"{project} work items export")

    @tool(capabilities=("report.pdf",), entities=("work_item",))
    def generate_pdf(title: str, rows: list[dict[str, Any]]) -> Payload:
        """Render work-item rows as a PDF table report (id, title, priority, assignee, updated)
        and return the PDF."""
        delivered.rows = rows
        delivered.calls += 1
        write_pdf(pdf_path, title, rows)
        return Payload.from_path(pdf_path, "application/pdf", kind="report/pdf", label=title)

    return [export_work_items, generate_pdf]


def write_pdf(path: Path, title: str, rows: list[dict[str, Any]]) -> None:
    """Write a PDF table of `rows` titled `title` to `path`; raises `RuntimeError` when reportlab
    is missing."""
    try:
        from reportlab.lib import colors
        from reportlab.lib.pagesizes import A4, landscape
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import LongTable, Paragraph, SimpleDocTemplate, TableStyle
    except ImportError as exc:
        raise MissingExtra("generate_pdf (reportlab)", "pdf") from exc
    styles = getSampleStyleSheet()
    columns = ("id", "title", "priority", "assignee", "updated")
    data = [list(columns)] + [[str(r.get(c, "")) for c in columns] for r in rows]
    table = LongTable(data, repeatRows=1, colWidths=(70, 380, 50, 70, 70))
    table.setStyle(TableStyle([
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#1f3a5f")),
        ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
        ("FONTSIZE", (0, 0), (-1, -1), 8),
        ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.HexColor("#eef2f7")]),
    ]))
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = SimpleDocTemplate(str(path), pagesize=landscape(A4), title=title)
    doc.build([Paragraph(title, styles["Title"]),
               Paragraph(f"{len(rows):,} items", styles["Normal"]), table])
