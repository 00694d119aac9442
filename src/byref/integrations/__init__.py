"""byref inside the agent frameworks people already use: pydantic-ai, LangChain v1, the OpenAI
Agents SDK.

Owns the framework-facing edge: one module per framework (`byref.integrations.pydantic_ai`,
`.langchain`, `.openai_agents`), each an extra (`byref[pydantic-ai]`, `byref[langchain]`,
`byref[openai-agents]`) that imports its framework lazily, plus the framework-free `Bridge` they
share (`byref.integrations.bridge`). Each gives that framework's users byref's three economics in
the framework's own hook: results by reference (large or binary results stored, every argument
accepting a `$ref` resolved exactly before the tool runs, the read tools added), find-don't-load
(search_tools / activate_tool over a `Catalog`, the working set projected from the framework's
message history), and budgeted history (settled results become exact-reread stubs under a byte
budget, where the framework lets a library rewrite the model input).

The law: framework types are converted at this edge and go no deeper; every tool call a model
makes reaches byref's dispatcher (`byref.dispatch`), so nothing it writes raises out of a tool
call, and each framework keeps its own model abstraction, so any model it supports works.
Importing `byref` never imports a framework.
"""

from byref.integrations.bridge import Bridge, Seen

__all__ = ["Bridge", "Seen"]
