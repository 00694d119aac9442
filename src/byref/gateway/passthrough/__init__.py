"""Every MCP feature that is not a tool call, passed between clients and upstreams."""
