"""Where clients meet the gateway: the MCP server and its transports (`server`), the operations
routes (`ops`), and `lanes/`, the paths that answer a plain call without the SDK's request
machinery."""
