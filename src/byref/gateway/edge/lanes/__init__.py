"""The server-edge SDK bypasses: a plain `tools/call` answered as wire JSON (`fastpath`), over
stdio (`stdio`, `stdio_context`) and over HTTP (`http`), each answering exactly as the SDK's own
path would (pinned against it by tests/gateway). Listed, with the switch that turns them off, in
`byref.gateway.wire.bypass`."""
