"""The bytes on both edges: byref's stdio framing, the SDK's internals read in two modules, and the
bypasses' switch."""
