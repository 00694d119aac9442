"""byref: the model routes references; the bytes stay below the context boundary.

The front door: everything an agent builder needs is importable from `byref` itself. Names are
loaded on first use (PEP 562), so `import byref` stays light and the gateway's `mcp` dependency
is needed only by code that touches `byref.Gateway` or `byref.load_config`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # tools and the loop
    "tool": "byref.tools", "Tool": "byref.tools", "ToolRefusal": "byref.tools",
    "Payload": "byref.tools", "builtin_tools": "byref.tools",
    "Harness": "byref.harness", "Session": "byref.harness", "ScriptedModel": "byref.harness",
    "call": "byref.harness",
    "say": "byref.harness", "model_from_id": "byref.harness.providers",
    "Policy": "byref.dispatch",
    # references and storage
    "Message": "byref.refs", "Blob": "byref.refs",
    "open_store": "byref.store", "Scope": "byref.store",
    # discovery
    "Catalog": "byref.discovery", "Discovery": "byref.discovery",
    # the MCP gateway (needs the `mcp` extra)
    "Gateway": "byref.gateway", "load_config": "byref.gateway",
    # errors, by audience
    "ByrefError": "byref.errors", "Refused": "byref.errors", "DeveloperError": "byref.errors",
    "OperatorError": "byref.errors",
}
_EXTRAS = {"byref.gateway": "mcp"}

__all__ = [
    "Blob", "ByrefError", "Catalog", "DeveloperError", "Discovery", "Gateway", "Harness",
    "Message", "OperatorError", "Payload", "Policy", "Refused", "Scope", "ScriptedModel",
    "Session", "Tool",
    "ToolRefusal", "__version__", "builtin_tools", "call", "load_config", "model_from_id",
    "open_store", "say", "tool",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'byref' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(module_name)
        if extra is None:
            raise
        raise ModuleNotFoundError(
            f"byref.{name} needs the {extra!r} extra: pip install 'byref[{extra}]' (from a "
            "clone: pip install -e '.[" + extra + "]')."
        ) from exc
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from byref.discovery import Catalog, Discovery
    from byref.dispatch import Policy
    from byref.errors import ByrefError, DeveloperError, OperatorError, Refused
    from byref.gateway import Gateway, load_config
    from byref.harness import Harness, ScriptedModel, Session, call, say
    from byref.harness.providers import model_from_id
    from byref.refs import Blob, Message
    from byref.store import Scope, open_store
    from byref.tools import Payload, Tool, ToolRefusal, builtin_tools, tool
