"""The built-in readers: `read_result`, `read_json` / `query_json` and `present`, and the list
(`builtins`) of those every placed or stored result may send the model to.

Owns the tools through which a model reads (or shows) what dispatch kept, without the bytes
passing through its context. The law: whatever a substitute's note tells the model to call is
declared by then, and a read runs on the stored version under the request's byte bounds.
"""
