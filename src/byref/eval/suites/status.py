"""The status report: the demo's scenario (`demo/scenario.py`) as an eval task.

Filter the ATLAS work-items export to its open items and make a PDF of them; success is
`generate_pdf` receiving exactly the open rows. Inline is the demo's naive harness (the model
reads the export and retypes the rows), refs is the demo's byref run, code is one program.
The oracle's refs and inline runs are the demo's own scripts, so their ledgers are the demo's.
"""

from __future__ import annotations

from pathlib import Path

from byref.demo.data import DEFAULT_SIZE, open_rows, write_export
from byref.demo.scenario import QUESTION, TITLE, byref_script, naive_script
from byref.demo.tools import Delivered, make_tools
from byref.dispatch import Policy
from byref.eval.task import ARMS, Setup, Task
from byref.harness.scripted import ScriptedModel, Step, call, say
from byref.tools import BUILTIN_JSON_TOOLS

PROGRAM = f"""data = tools.export_work_items(project="ATLAS")
doc = data.json() if hasattr(data, "json") else data
rows = [item for item in doc["items"] if item["status"] == "open"]
tools.generate_pdf(title={TITLE!r}, rows=rows)
"""


def tasks(size: int = DEFAULT_SIZE) -> list[Task]:
    """The one task, over an export of about `size` bytes."""
    def build(arm: str, scratch: Path) -> Setup:
        export = scratch / "export.json"
        write_export(export, size)
        delivered = Delivered()
        tools = [*make_tools(export, scratch / "report.pdf", delivered), *BUILTIN_JSON_TOOLS]

        def settle(setup: Setup) -> None:
            if delivered.calls:
                setup.received.append(("generate_pdf", {"rows": delivered.rows}))

        return Setup(tools, frozenset({"generate_pdf"}), {"rows": open_rows(export)},
                     frozenset(t.name for t in tools),
                     policy=Policy.naive() if arm == "inline" else None,
                     code_mode=arm == "code", settle=settle)

    def oracle(arm: str) -> list[Step] | ScriptedModel:
        if arm == "code":
            return [call("run_code", {"code": PROGRAM}),
                    say("Done: the PDF status report of the open ATLAS work items is ready.")]
        return naive_script() if arm == "inline" else byref_script()

    return [Task("status", "status-report", QUESTION, ARMS, build, oracle,
                 {"export_bytes": size, "group": f"{size:,} bytes"})]
