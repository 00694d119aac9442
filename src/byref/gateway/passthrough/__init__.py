"""Every MCP feature that is not a tool call: the handlers (`handlers`: prompts, completion,
logging, roots), resources (`resources`: lists, reads, subscriptions), the names they carry mapped
back to their server (`uris`, `prompts`), byref's own artifacts as resources (`artifacts`), and
list pagination (`pages`)."""
