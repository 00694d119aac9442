"""byref's own stdio framing, used on both edges: newline-delimited JSON-RPC (`lines`) and the
streams an SDK session reads and writes (`stdio`)."""
