"""byref: the model routes references; the bytes stay below the context boundary.

The front door: everything an agent builder needs is importable from `byref` itself. Names are
loaded on first use (PEP 562), so `import byref` stays light and the gateway's `mcp` dependency
is needed only by code that touches `byref.Gateway` or `byref.load_config`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {  # name → the module that defines it; the one list of the door
    # tools and the loop
    "tool": "byref.tools", "Tool": "byref.tools", "ToolRefusal": "byref.tools",
    "Payload": "byref.tools", "builtin_tools": "byref.tools", "ToolSource": "byref.tools",
    "Harness": "byref.harness", "Session": "byref.harness", "ScriptedModel": "byref.harness",
    "call": "byref.harness", "Limits": "byref.harness",
    "say": "byref.harness", "model_from_id": "byref.harness.providers",
    "Policy": "byref.dispatch",
    # references and storage
    "MessageRef": "byref.refs", "Blob": "byref.refs",
    "open_store": "byref.store", "Scope": "byref.store",
    # discovery
    "Catalog": "byref.discovery", "Discovery": "byref.discovery",
    # the MCP gateway (needs the `mcp` extra)
    "Gateway": "byref.gateway", "load_config": "byref.gateway",
    # errors, by audience
    "ByrefError": "byref.errors", "Refused": "byref.errors", "DeveloperError": "byref.errors",
    "InvalidValue": "byref.errors", "OperatorError": "byref.errors",
}
_EXTRAS = {"byref.gateway": "mcp"}

__all__ = sorted([*_EXPORTS, "__version__"])


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
        from byref.errors import MissingExtra

        raise MissingExtra(f"byref.{name}", extra) from exc
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what the lazy names are, for type checkers (`as`: explicit re-exports)
    from byref.discovery import Catalog as Catalog
    from byref.discovery import Discovery as Discovery
    from byref.dispatch import Policy as Policy
    from byref.errors import ByrefError as ByrefError
    from byref.errors import DeveloperError as DeveloperError
    from byref.errors import InvalidValue as InvalidValue
    from byref.errors import OperatorError as OperatorError
    from byref.errors import Refused as Refused
    from byref.gateway import Gateway as Gateway
    from byref.gateway import load_config as load_config
    from byref.harness import Harness as Harness
    from byref.harness import Limits as Limits
    from byref.harness import ScriptedModel as ScriptedModel
    from byref.harness import Session as Session
    from byref.harness import call as call
    from byref.harness import say as say
    from byref.harness.providers import model_from_id as model_from_id
    from byref.refs import Blob as Blob
    from byref.refs import MessageRef as MessageRef
    from byref.store import Scope as Scope
    from byref.store import open_store as open_store
    from byref.tools import Payload as Payload
    from byref.tools import Tool as Tool
    from byref.tools import ToolRefusal as ToolRefusal
    from byref.tools import ToolSource as ToolSource
    from byref.tools import builtin_tools as builtin_tools
    from byref.tools import tool as tool
