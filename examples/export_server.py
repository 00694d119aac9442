"""A small MCP server for trying the gateway: `examples/gateway.json` starts it.

Standard library only, so any `python3` runs it. Its `export_orders` returns a large JSON export
(about 1 MB for the default 10,000 orders) and `count_late` counts the late orders in one: through
byref the model sees a short preview and a `{"$ref": …}` for the export, passes that ref to
`count_late`, and the gateway hands the tool the exact bytes — the export never enters the
model's context. It speaks MCP's stdio transport: one JSON-RPC message per line.
"""

import json
import sys

TOOLS = [
    {"name": "export_orders",
     "description": "Export every order as one JSON document: {\"orders\": [{id, status, "
                    "customer, total}, …]}.",
     "inputSchema": {"type": "object", "properties": {
         "count": {"type": "integer", "description": "How many orders (default 10000)."}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "count_late",
     "description": "Count the late orders in an export (pass export_orders' result).",
     "inputSchema": {"type": "object", "required": ["export"], "properties": {
         "export": {"type": "string", "description": "export_orders' result (its JSON)."}}},
     "annotations": {"readOnlyHint": True}},
]


def export_orders(count: int = 10_000) -> str:
    """`count` orders as one JSON document (every seventh is late)."""
    orders = [{"id": i, "status": "late" if i % 7 == 0 else "ok",
               "customer": f"customer-{i % 97}", "total": round(3.5 * i, 2)}
              for i in range(max(0, min(int(count), 1_000_000)))]
    return json.dumps({"orders": orders})


def count_late(export: str) -> str:
    """How many orders `export` (export_orders' JSON) holds, and how many of them are late."""
    orders = json.loads(export).get("orders", [])
    late = sum(1 for order in orders if order.get("status") == "late")
    return json.dumps({"orders": len(orders), "late": late})


def answer(message: dict) -> dict | None:
    """The JSON-RPC answer to one message (None for a notification)."""
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None  # a notification (notifications/initialized, …): nothing to answer
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "example-exports", "version": "1.0"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        try:
            text = {"export_orders": export_orders, "count_late": count_late}[name](**args)
            result = {"content": [{"type": "text", "text": text}]}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            result = {"content": [{"type": "text", "text": f"{name!r} failed: {exc!r}"}],
                      "isError": True}
    else:
        return {"jsonrpc": "2.0", "id": message["id"],
                "error": {"code": -32601, "message": f"Method not found: {method!r}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    """Answer each line of stdin on stdout until stdin ends."""
    for line in sys.stdin:
        if line.strip():
            reply = answer(json.loads(line))
            if reply is not None:
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
