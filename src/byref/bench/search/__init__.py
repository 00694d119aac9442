"""Search benchmarks (`byref bench search`): retrieval quality, search latency, abstention.

Owns the eval readers (MetaTool, the real MCP catalog), the dev query sets written here (the .txt
files beside these modules), the sweeps behind discovery's chosen figures, and the kept BM25
engines timed beside byref's lexical search. The law: a figure is measured on held-apart data
against a baseline run in the same process.
"""
