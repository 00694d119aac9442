"""What only the 2026-07-28 revision asks of the client side: which revision an upstream speaks
(`era`), its input-required questions (`inputs`), resource updates on one listen stream
(`watch`) and its list answers' caching hints (`hints`)."""
