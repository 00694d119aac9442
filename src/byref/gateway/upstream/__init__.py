"""The gateway's client side: who shares an upstream process and the pool of them (`pool`),
connections to the user's MCP servers (`manager`), one bounded operation on a live connection
(`bounds`), the processes behind stdio servers (`spawn`), plain calls written straight to their
pipes (`raw_calls`), server→client traffic routed back to the owner's calling session (`relay`),
2026-07-28 input-required rounds (`inputs`), and requests sent to every upstream or to the one
that owns a name (`fanout`)."""
