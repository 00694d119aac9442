"""Code mode: `run_code` (`run_code`), a program in run_python's sandbox that calls tools over
refs — its host and rules (`code_host`), handles (`code_handles`), channel frames (`channel`)
and the sandboxed side (`code_child`, a file run by itself that imports no byref).

Owns the program's route to tools. The law: the host trusts nothing the child sends and gives it
only what its calls and inputs gave it; every inner call goes through the dispatcher that ran
`run_code`.
"""
