"""The SDK bypasses: a plain `tools/call` answered as wire JSON (`fastpath`), over stdio (`stdio`,
`stdio_context`) and over HTTP (`http`). Each answers exactly as the SDK's own path would."""
