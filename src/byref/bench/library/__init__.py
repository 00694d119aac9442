"""Library benchmarks (`byref bench context`, `dispatch`, `store`, `conversations`).

Owns what byref's in-process layers cost: a long session's context, the dispatch pipeline (sync
and async), artifact-store throughput and memory per adapter, and the conversation-state port.
The law: each figure is a ratio against the same work done without the layer, in the same run.
"""
