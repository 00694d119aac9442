"""`dev.byref/refs`, byref's refs as an MCP extension others implement (docs/extensions/refs.md).

Owns the wire vocabulary (`protocol`), the extension for the official SDK's server (`server`)
and the public battery (`conformance`). The law: a side that did not declare the extension sees
core MCP unchanged.
"""
