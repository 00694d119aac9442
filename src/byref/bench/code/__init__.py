"""Code benchmarks (`byref bench code-mode`, `run-python`): what a sandboxed run costs.

Owns the code-mode run against the same calls made one by one, and a trivial `run_python` call
with and without its sandbox. The law: the baseline runs in the same process and run.
"""
