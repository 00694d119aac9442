"""`run_python` and the sandbox it runs in: the tool (`code`), the runner port and its limited
subprocess (`runner`), the namespaces (`sandbox`), the sandbox's pid 1 (`sandbox_init`, a file
run by itself) and the syscall filter (`syscalls`).

Owns running untrusted Python over staged refs. The law: the code sees its work directory, its
inputs and the interpreter, nothing of the host, under limits that hold for the whole run; where
no sandbox can be made, the runner refuses.
"""
