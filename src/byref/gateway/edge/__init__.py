"""Where clients meet the gateway: the MCP server, its transports, its answers and the lanes that
bypass the SDK's request machinery."""
