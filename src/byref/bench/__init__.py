"""byref.bench — the benchmarks, grouped by what they measure, above every library layer.

Owns the measured runs `byref bench …` prints (context, dispatch, store, conversations, search and
retrieval, gateway, demo) and the rigs they need (reference upstreams, configs, eval data readers).
Its law: nothing in the library imports it — only `byref.cli` and the tests do — so a benchmark can
reach any layer without bending the library's downward-only imports, and every figure it prints is
a ratio against a baseline measured in the same run. Folders: `search/` (retrieval, latency,
abstention and their query sets), `gateway/`, `code/` (code mode, `run_python`) and `library/`
(context, dispatch, store, conversations, demo).
"""
