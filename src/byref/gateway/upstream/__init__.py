"""The gateway's client side: who shares an upstream process (`pooled`) and the pool of them
(`pool`), what is asked of one upstream (`manager`) and its connection (`connection`) on its
transport (`transport`), one bounded operation on a live connection (`bounds`), the processes
behind stdio servers (`spawn`), plain calls written straight to their pipes (`raw_calls`),
server→client traffic routed back to the owner's calling session (`relay`), 2026-07-28
input-required rounds (`inputs`), and requests sent to every upstream or to the one that owns a
name (`fanout`)."""
