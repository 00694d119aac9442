"""Tools: `Tool` / `@tool`, input schemas from type hints, `$ref` schema rewriting, payloads, and
the built-in tools.

Owns how a function becomes something a model can call, and the tool-source port (`ToolSource`:
Python functions, a catalog, an MCP server, and wrappers that filter or prefix them). The law: a
tool author writes plain typed Python; references, resolution and storage are dispatch's
business, not the tool's (a parameter marked lazy is the one opt-in to see a `Ref`).
"""

from byref.tools.blocks import Blocks
from byref.tools.call_context import ScopedArtifacts, ToolContext
from byref.tools.payload import Payload
from byref.tools.readers.builtins import builtin_tools
from byref.tools.readers.json_tools import BUILTIN_JSON_TOOLS, query_json, read_json
from byref.tools.readers.read_result import make_read_result
from byref.tools.schema import SchemaCache, rewrite_schema
from byref.tools.sources import (
    CatalogSource,
    Filtered,
    McpSource,
    Prefixed,
    ToolSet,
    ToolSource,
)
from byref.tools.tool import Tool, ToolInputError, ToolRefusal, artifact_ref_schema, tool

__all__ = [
    "BUILTIN_JSON_TOOLS",
    "Blocks",
    "CatalogSource",
    "Filtered",
    "McpSource",
    "Payload",
    "Prefixed",
    "SchemaCache",
    "ScopedArtifacts",
    "Tool",
    "ToolContext",
    "ToolInputError",
    "ToolRefusal",
    "ToolSet",
    "ToolSource",
    "artifact_ref_schema",
    "builtin_tools",
    "make_read_result",
    "query_json",
    "read_json",
    "rewrite_schema",
    "tool",
]
