"""`byref eval`: task suites × arms × a model, scored on the state the tools were left in.

Suites (`suites/`): nested calls from NESTFUL, large results over generated corpora, the demo's
status report, tool selection over a real MCP catalog. Arms: `inline` (results inlined, values
retyped), `refs` (byref), `code` (`run_code`); for selection, `direct` and `search`. The model
is the scripted oracle (the bound on tokens), any `provider:model` id, or a recording
(`record`). Only the CLI imports this package, as it does the benchmarks.
"""
