"""The server-edge SDK bypasses, each answering exactly as the SDK's own path would (listed, with
their switch, in `byref.gateway.wire.bypass`)."""
